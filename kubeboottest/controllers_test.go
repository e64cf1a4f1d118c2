package kubeboottest

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// TestControllers runs the garbage collector and namespace controller for
// two servers in this one process: in each, deleting an owner deletes its
// dependent (foreground: the owner waits for it), and a namespace with
// content finishes deleting.
func TestControllers(t *testing.T) {
	for i := range 2 {
		t.Run(fmt.Sprintf("server %d", i), func(t *testing.T) {
			t.Parallel()
			srv := Start(t, Options{Controllers: []string{"garbagecollector", "namespace"}})
			client := kubernetes.NewForConfigOrDie(srv.Config)
			ctx := context.Background()
			owner, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent", OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, BlockOwnerDeletion: ptr.To(true)}}}}
			if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, dependent, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := client.CoreV1().ConfigMaps("default").Delete(ctx, "owner", metav1.DeleteOptions{
				PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
				t.Fatal(err)
			}
			gone(t, "the owner and its dependent", func(ctx context.Context) error {
				if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "dependent", metav1.GetOptions{}); err == nil || !apierrors.IsNotFound(err) {
					return fmt.Errorf("dependent: %v", err)
				}
				_, err := client.CoreV1().ConfigMaps("default").Get(ctx, "owner", metav1.GetOptions{})
				return err
			})

			if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := client.CoreV1().Secrets("doomed").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := client.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			gone(t, "namespace doomed", func(ctx context.Context) error {
				_, err := client.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
				return err
			})
		})
	}
}

// gone waits until get returns NotFound.
func gone(t *testing.T, what string, get func(context.Context) error) {
	t.Helper()
	var last error
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = get(ctx)
		return apierrors.IsNotFound(last), nil
	}); err != nil {
		t.Fatalf("%s not deleted: %v", what, last)
	}
}

// TestTokensController: the legacy service account token controller runs
// without leader election too, and the token it writes into a
// service-account-token Secret authenticates as the account.
func TestTokensController(t *testing.T) {
	srv := Start(t, Options{Controllers: []string{"serviceaccount-token"}})
	client := kubernetes.NewForConfigOrDie(srv.Config)
	ctx := context.Background()
	if _, err := client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "legacy"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy-token", Annotations: map[string]string{corev1.ServiceAccountNameKey: "legacy"}},
		Type:       corev1.SecretTypeServiceAccountToken,
	}
	if _, err := client.CoreV1().Secrets("default").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var token []byte
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := client.CoreV1().Secrets("default").Get(ctx, "legacy-token", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		token = s.Data[corev1.ServiceAccountTokenKey]
		return len(token) > 0 && len(s.Data[corev1.ServiceAccountRootCAKey]) > 0, nil
	}); err != nil {
		t.Fatalf("the Secret got no token and CA: %v", err)
	}
	asAccount := rest.AnonymousClientConfig(srv.Config)
	asAccount.BearerToken = string(token)
	review, err := kubernetes.NewForConfigOrDie(asAccount).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("whoami with the Secret's token: %v", err)
	}
	if got, want := review.Status.UserInfo.Username, "system:serviceaccount:default:legacy"; got != want {
		t.Errorf("the Secret's token authenticates as %q, want %q", got, want)
	}
}

// TestSimulatedNodes: a Pod given a simulated node's name runs there, is
// Ready, and gets an IP from the node's pod CIDR.
func TestSimulatedNodes(t *testing.T) {
	srv := Start(t, Options{SimulatedNodes: 2})
	client := kubernetes.NewForConfigOrDie(srv.Config)
	ctx := context.Background()
	// No serviceaccount controller runs here to make the namespace's
	// default account, which admission requires of a Pod.
	if _, err := client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec:       corev1.PodSpec{NodeName: "simulated-1", Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Pod
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", nil
	}); err != nil {
		t.Fatalf("the Pod did not run: %v; status %+v", err, last.Status)
	}
	node, err := client.CoreV1().Nodes().Get(ctx, "simulated-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, cidr, err := net.ParseCIDR(node.Spec.PodCIDR)
	if err != nil {
		t.Fatalf("node pod CIDR %q: %v", node.Spec.PodCIDR, err)
	}
	if !cidr.Contains(net.ParseIP(last.Status.PodIP)) {
		t.Errorf("pod IP %s is not in the node's pod CIDR %s", last.Status.PodIP, cidr)
	}
}
