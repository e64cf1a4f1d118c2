package namespace_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/kubeboot/kubeboot/internal/apiserver/controllers/namespace"
	"github.com/kubeboot/kubeboot/kubeboottest"
)

// One server for the package; each test uses namespaces of its own names.
// The server runs its own instance of this controller (it cannot be turned
// off), so the tests drive theirs directly through Sync and check only
// outcomes that hold whichever instance gets there first.
var (
	client kubernetes.Interface
	ctrl   *namespace.Controller
)

func TestMain(m *testing.M) {
	kubeboottest.Main(kubeboottest.Options{}, func(srv *kubeboottest.Server) int { return runTests(m, srv) })
}

// runTests sets up what the tests share on srv and runs them.
func runTests(m *testing.M, srv *kubeboottest.Server) int {
	client = kubernetes.NewForConfigOrDie(srv.Config)
	md := metadata.NewForConfigOrDie(srv.Config)

	factory := informers.NewSharedInformerFactory(client, 0)
	nsInformer := factory.Core().V1().Namespaces()
	var err error
	ctrl, err = namespace.New(client, md, nsInformer)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	defer func() {
		cancel() // first: Shutdown waits for the informers to end
		factory.Shutdown()
	}()
	if err := ctrl.Start(ctx, nsInformer.Informer().HasSynced); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var runs atomic.Int32

// uniq makes names unique per run of a test, so that -count=N reuses the
// one server.
func uniq(name string) string { return fmt.Sprintf("%s-%d", name, runs.Add(1)) }

func createNamespace(t *testing.T, name string, finalizers ...corev1.FinalizerName) *corev1.Namespace {
	t.Helper()
	ns, err := client.CoreV1().Namespaces().Create(ctxFor(t), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NamespaceSpec{Finalizers: finalizers},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func getNamespace(t *testing.T, name string) *corev1.Namespace {
	t.Helper()
	ns, err := client.CoreV1().Namespaces().Get(ctxFor(t), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// syncUntil runs our controller's pass on name until cond holds.
func syncUntil(t *testing.T, name, what string, cond func() bool) {
	t.Helper()
	ctx := ctxFor(t)
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		if _, err := ctrl.Sync(ctx, name); err != nil {
			lastErr = err
		}
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("namespace %s: timed out waiting for %s (last sync error: %v)", name, what, lastErr)
	}
}

func populate(t *testing.T, ns string) (clusterIP string) {
	t.Helper()
	ctx := ctxFor(t)
	for i := range 3 {
		if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"k": "v"},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "secret"}, StringData: map[string]string{"k": "v"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "svc"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": "x"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.NetworkingV1().IPAddresses().Get(ctx, svc.Spec.ClusterIP, metav1.GetOptions{}); err != nil {
		t.Fatalf("IPAddress %s of the Service: %v", svc.Spec.ClusterIP, err)
	}
	return svc.Spec.ClusterIP
}

// leftovers lists what remains in ns (they would be orphans once it is
// gone).
func leftovers(t *testing.T, ns string) []string {
	t.Helper()
	ctx := ctxFor(t)
	var out []string
	cms, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range cms.Items {
		out = append(out, "configmap/"+o.Name)
	}
	secrets, err := client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range secrets.Items {
		out = append(out, "secret/"+o.Name)
	}
	svcs, err := client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range svcs.Items {
		out = append(out, "service/"+o.Name)
	}
	return out
}

// A deleted namespace's contents go, then the namespace; its Services'
// ClusterIPs are released.
func TestDeletedNamespaceGoes(t *testing.T) {
	ctx := ctxFor(t)
	name := uniq("nsctl-contents")
	createNamespace(t, name)
	ip := populate(t, name)
	if err := client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ns := getNamespace(t, name); ns != nil && ns.Status.Phase != corev1.NamespaceTerminating {
		t.Errorf("deleted namespace phase = %s, want Terminating", ns.Status.Phase)
	}
	syncUntil(t, name, "the namespace to be gone", func() bool { return getNamespace(t, name) == nil })
	if left := leftovers(t, name); len(left) > 0 {
		t.Errorf("objects left behind: %v", left)
	}
	if _, err := client.NetworkingV1().IPAddresses().Get(ctx, ip, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("IPAddress %s of the deleted Service: %v, want NotFound", ip, err)
	}
	done, err := ctrl.Sync(ctx, name)
	if err != nil || !done {
		t.Errorf("sync of a namespace that is gone = %v, %v; want true, nil", done, err)
	}
}

// Another finalizer keeps the namespace Terminating (emptied, without the
// kubernetes finalizer) until its owner removes it.
func TestOtherFinalizerKeepsNamespace(t *testing.T) {
	ctx := ctxFor(t)
	name := uniq("nsctl-other-finalizer")
	const other corev1.FinalizerName = "example.com/hold"
	ns := createNamespace(t, name, other)
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) || !slices.Contains(ns.Spec.Finalizers, other) {
		t.Fatalf("created namespace finalizers = %v", ns.Spec.Finalizers)
	}
	populate(t, name)
	if err := client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	syncUntil(t, name, "the kubernetes finalizer to be removed", func() bool {
		ns := getNamespace(t, name)
		return ns == nil || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
	})
	for range 3 {
		done, err := ctrl.Sync(ctx, name)
		if err != nil || !done {
			t.Errorf("sync = %v, %v; want true, nil (the rest is another's job)", done, err)
		}
	}
	ns = getNamespace(t, name)
	if ns == nil {
		t.Fatal("namespace deleted although another finalizer remains")
	}
	if ns.Status.Phase != corev1.NamespaceTerminating || !slices.Equal(ns.Spec.Finalizers, []corev1.FinalizerName{other}) {
		t.Errorf("namespace phase %s finalizers %v; want Terminating with only %s", ns.Status.Phase, ns.Spec.Finalizers, other)
	}
	if left := leftovers(t, name); len(left) > 0 {
		t.Errorf("contents not deleted: %v", left)
	}

	// The other owner finishes: the namespace goes.
	ns.Spec.Finalizers = nil
	if _, err := client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	syncUntil(t, name, "the namespace to be gone", func() bool { return getNamespace(t, name) == nil })
}

// A live namespace is left alone.
func TestLiveNamespaceUntouched(t *testing.T) {
	ctx := ctxFor(t)
	name := uniq("nsctl-live")
	ns := createNamespace(t, name)
	if _, err := client.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "keep"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	done, err := ctrl.Sync(ctx, name)
	if err != nil || !done {
		t.Errorf("sync = %v, %v; want true, nil", done, err)
	}
	if got := getNamespace(t, name); got.ResourceVersion != ns.ResourceVersion {
		t.Error("live namespace rewritten")
	}
	if left := leftovers(t, name); !slices.Equal(left, []string{"configmap/keep"}) {
		t.Errorf("contents = %v", left)
	}
}

// The running controller (ours and the server's, fed by informers)
// finalizes without being called.
func TestRunningController(t *testing.T) {
	ctx := ctxFor(t)
	name := uniq("nsctl-running")
	createNamespace(t, name)
	populate(t, name)
	if err := client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return getNamespace(t, name) == nil, nil
	})
	if err != nil {
		t.Fatalf("namespace not finalized: %+v", getNamespace(t, name))
	}
	if left := leftovers(t, name); len(left) > 0 {
		t.Errorf("objects left behind: %v", left)
	}
}
