package server

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestServerNodeContainerd runs `kubeboot server --node` with its kubelet on
// containerd and runc, in a private network and mount namespace: real
// containers, from images made on the machine (harness.StartContainerd), on
// a CNI bridge. It checks that a Pod's container runs and answers on the
// Pod's IP, that `kubectl logs` and `kubectl exec` reach it through the
// apiserver and the kubelet, that a ClusterIP Service reaches it through
// kube-proxy, that a Pod's service account token still authenticates it
// minutes after it started, and that a deleted Pod's container stops.
func TestServerNodeContainerd(t *testing.T) {
	harness.RequireContainerd(t)
	addr, ok := inProxyNetNS(t)
	if !ok {
		return
	}
	srv, _, _ := startNodeServer(t, addr, harness.StartContainerd(t, "10.244.0.0/24"))
	client := srv.MustClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	node := waitNode(ctx, t, client, nodeName)
	if got := node.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(got, "containerd://") {
		t.Errorf("container runtime %q, want containerd", got)
	}
	// Started first, checked last: its token must outlive the JWT
	// library's one-minute leeway.
	runPod(ctx, t, client, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "whoami", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "whoami", Image: harness.TestImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{"whoami", "10s"},
		}}},
	})

	const port = 8080
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: metav1.NamespaceDefault, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "web", Image: harness.TestImage, ImagePullPolicy: corev1.PullNever,
			Args:  []string{"serve", "8080"},
			Ports: []corev1.ContainerPort{{ContainerPort: port}},
			// Ready only once the kubelet's probe reaches the container.
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1,
				ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}}},
		}}},
	}
	last := runPod(ctx, t, client, pod)
	// The container's hostname is the Pod's name.
	const hello = "hello from web"

	t.Run("the container answers on the Pod's IP", func(t *testing.T) {
		if got, err := dialHello(net.JoinHostPort(last.Status.PodIP, "8080")); got != hello {
			t.Errorf("Pod IP %s answered %q (%v), want %q", last.Status.PodIP, got, err, hello)
		}
	})

	t.Run("kubectl logs", func(t *testing.T) {
		if out := kubectl(t, srv, "logs", "web"); out != "serving on :8080\n" {
			t.Errorf("kubectl logs web: %q, want the container's one line", out)
		}
	})

	t.Run("kubectl exec", func(t *testing.T) {
		if out := kubectl(t, srv, "exec", "web", "--", harness.TestImageCommand, "echo", "hi", "from", "exec"); out != "hi from exec\n" {
			t.Errorf("kubectl exec web: %q, want %q", out, "hi from exec\n")
		}
	})

	t.Run("a ClusterIP reaches the Pod", func(t *testing.T) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: metav1.NamespaceDefault},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(port)}}},
		}
		svc, err := client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitHello(t, net.JoinHostPort(svc.Spec.ClusterIP, "80"), hello)
	})

	t.Run("a Pod's token still works after two minutes", func(t *testing.T) {
		checkTokenLasts(ctx, t, client, metav1.NamespaceDefault, "whoami", 130*time.Second)
		deletePod(ctx, t, client, metav1.NamespaceDefault, "whoami")
	})

	t.Run("a deleted Pod's container stops", func(t *testing.T) {
		deletePod(ctx, t, client, metav1.NamespaceDefault, "web")
		for pid, p := range harness.Processes() {
			if len(p.Args) > 1 && p.Args[0] == harness.TestImageCommand && p.Args[1] == "serve" {
				t.Errorf("the Pod's container (process %d, %v) still runs after the Pod is gone", pid, p.Args)
			}
		}
	})
}

// checkTokenLasts reads the log of Pod ns/name, which runs `testcontainer
// whoami` (a SelfSubjectReview with its projected service account token
// every few seconds), until it covers at least after since the Pod
// started, and requires every review to have authenticated the Pod's
// service account. The kubelet asks for 3607 s tokens, which
// kube-apiserver extends to a year (--service-account-extend-token-expiration).
func checkTokenLasts(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name string, after time.Duration) {
	t.Helper()
	want := fmt.Sprintf("201 system:serviceaccount:%s:default", ns)
	var lines []string
	err := wait.PollUntilContextCancel(ctx, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		out, err := client.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return false, nil
		}
		lines = strings.Split(strings.TrimSpace(string(out)), "\n")
		var seconds int
		fmt.Sscan(lines[len(lines)-1], &seconds)
		return time.Duration(seconds)*time.Second >= after, nil
	})
	if err != nil {
		t.Fatalf("the Pod's log does not reach %s: %v\n%s", after, err, strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if _, result, _ := strings.Cut(l, " "); result != want {
			t.Errorf("review at %s, want %q; the whole log:\n%s", l, want, strings.Join(lines, "\n"))
			break
		}
	}
}
