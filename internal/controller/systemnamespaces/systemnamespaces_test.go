package systemnamespaces_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/internal/controller/systemnamespaces"
	"github.com/kubeboot/kubeboot/kubeboottest"
)

// One server for the package; each test uses namespaces of its own names.
var client kubernetes.Interface

func TestMain(m *testing.M) {
	kubeboottest.Main(kubeboottest.Options{}, func(srv *kubeboottest.Server) int {
		client = kubernetes.NewForConfigOrDie(srv.Config)
		return m.Run()
	})
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
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

var runs atomic.Int32

// uniq makes names unique per run of a test, so that -count=N reuses the
// one server.
func uniq(name string) string { return fmt.Sprintf("%s-%d", name, runs.Add(1)) }

func TestNames(t *testing.T) {
	want := []string{"kube-system", "kube-public", "kube-node-lease", "default"}
	if got := systemnamespaces.Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
}

// Missing namespaces are created; existing ones are left as they are.
func TestSync(t *testing.T) {
	ctx := ctxFor(t)
	missingA, existingName, missingB := uniq("sysns-missing-a"), uniq("sysns-existing"), uniq("sysns-missing-b")
	existing, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: existingName, Labels: map[string]string{"keep": "me"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := systemnamespaces.NewFor(client, time.Hour, missingA, existingName, missingB)
	if err := c.Sync(ctx); err != nil {
		t.Fatalf("sync: %v", err)
	}
	for _, name := range []string{missingA, missingB} {
		ns := getNamespace(t, name)
		if ns == nil {
			t.Errorf("namespace %s not created", name)
			continue
		}
		if ns.Status.Phase != corev1.NamespaceActive {
			t.Errorf("namespace %s phase = %s", name, ns.Status.Phase)
		}
	}
	if ns := getNamespace(t, existingName); ns.ResourceVersion != existing.ResourceVersion || ns.Labels["keep"] != "me" {
		t.Errorf("existing namespace rewritten: %+v", ns.ObjectMeta)
	}

	// A second pass writes nothing.
	created := getNamespace(t, missingA)
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if ns := getNamespace(t, missingA); ns.ResourceVersion != created.ResourceVersion {
		t.Errorf("second pass rewrote %s", ns.Name)
	}
}

// The real system namespaces exist (the server made them) and a pass
// leaves them alone.
func TestSyncSystemNamespacesUntouched(t *testing.T) {
	ctx := ctxFor(t)
	before := map[string]string{}
	for _, name := range systemnamespaces.Names() {
		ns := getNamespace(t, name)
		if ns == nil {
			t.Fatalf("system namespace %s missing", name)
		}
		before[name] = ns.ResourceVersion
	}
	if err := systemnamespaces.New(client, 0).Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range systemnamespaces.Names() {
		if ns := getNamespace(t, name); ns.ResourceVersion != before[name] {
			t.Errorf("system namespace %s rewritten", name)
		}
	}
}

// Start creates the namespaces before it returns, then recreates one that
// was deleted within an interval (once the deletion completed).
func TestStartRecreates(t *testing.T) {
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	name := uniq("sysns-start")
	c := systemnamespaces.NewFor(client, 100*time.Millisecond, name)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	first := getNamespace(t, name)
	if first == nil {
		t.Fatal("Start returned before creating the namespace")
	}
	if err := client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var uid types.UID
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		ns := getNamespace(t, name)
		if ns != nil && ns.UID != first.UID {
			uid = ns.UID
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("namespace not recreated after delete: %v", err)
	}
	if uid == "" {
		t.Fatal("no new namespace")
	}
}

// Start gives up when its context ends before the first pass succeeds.
func TestStartCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := systemnamespaces.NewFor(client, time.Hour, uniq("sysns-cancelled"))
	if err := c.Start(ctx); err == nil {
		t.Error("Start with a cancelled context succeeded")
	}
}
