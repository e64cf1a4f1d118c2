package legacytokentracking_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/internal/controller/legacytokentracking"
	"github.com/kubeboot/kubeboot/kubeboottest"
)

// One server for the package. Its own controller wrote the ConfigMap at
// start and looks again only after a minute, so the tests (which share the
// one ConfigMap and run one after the other) see only their own writes.
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

func getConfigMap(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctxFor(t), legacytokentracking.ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func deleteConfigMap(t *testing.T) {
	t.Helper()
	err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Delete(ctxFor(t), legacytokentracking.ConfigMapName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// at is a clock stopped at t.
func at(t time.Time) func() time.Time { return func() time.Time { return t } }

func TestServerWroteIt(t *testing.T) {
	cm := getConfigMap(t)
	if cm == nil {
		t.Fatal("the server did not create the ConfigMap")
	}
	if _, err := time.Parse("2006-01-02", cm.Data["since"]); err != nil {
		t.Errorf("since = %q: %v", cm.Data["since"], err)
	}
}

func TestSync(t *testing.T) {
	// 01:00 on 1 March at UTC+5 is still 29 February in UTC.
	march1 := time.Date(2024, 3, 1, 1, 0, 0, 0, time.FixedZone("UTC+5", 5*3600))
	tests := []struct {
		name          string
		initial       map[string]string // nil: no ConfigMap
		wantSince     string
		wantUnchanged bool
	}{
		{name: "created when missing, with the UTC date", wantSince: "2024-02-29"},
		{name: "present: not rewritten", initial: map[string]string{"since": "2020-01-02"}, wantSince: "2020-01-02", wantUnchanged: true},
		// As kube-apiserver: an unparsable date is replaced by today's.
		{name: "invalid date repaired", initial: map[string]string{"since": "yesterday"}, wantSince: "2024-02-29"},
		{name: "missing key repaired", initial: map[string]string{"other": "x"}, wantSince: "2024-02-29"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t)
			deleteConfigMap(t)
			var before *corev1.ConfigMap
			if tc.initial != nil {
				var err error
				before, err = client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: legacytokentracking.ConfigMapName, Namespace: metav1.NamespaceSystem},
					Data:       tc.initial,
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
			}
			c := legacytokentracking.New(client, time.Hour)
			c.SetNow(at(march1))
			if err := c.Sync(ctx); err != nil {
				t.Fatalf("sync: %v", err)
			}
			cm := getConfigMap(t)
			if cm == nil {
				t.Fatal("no ConfigMap")
			}
			if cm.Data["since"] != tc.wantSince {
				t.Errorf("since = %q, want %q", cm.Data["since"], tc.wantSince)
			}
			if tc.wantUnchanged && cm.ResourceVersion != before.ResourceVersion {
				t.Errorf("ConfigMap rewritten")
			}
			// Later passes, on later days, keep the date.
			c.SetNow(at(march1.AddDate(0, 0, 10)))
			if err := c.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if again := getConfigMap(t); again.ResourceVersion != cm.ResourceVersion {
				t.Errorf("a later pass rewrote the ConfigMap: %v", again.Data)
			}
		})
	}
}

// Start creates the ConfigMap before returning and recreates it within an
// interval after a delete.
func TestStartRecreates(t *testing.T) {
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	deleteConfigMap(t)
	dayBefore := time.Now().UTC().Format("2006-01-02")
	if err := legacytokentracking.New(client, 100*time.Millisecond).Start(ctx); err != nil {
		t.Fatal(err)
	}
	dayAfter := time.Now().UTC().Format("2006-01-02")
	first := getConfigMap(t)
	if first == nil {
		t.Fatal("Start returned before creating the ConfigMap")
	}
	if since := first.Data["since"]; since != dayBefore && since != dayAfter {
		t.Errorf("since = %q, want today (UTC) %q", since, dayAfter)
	}
	deleteConfigMap(t)
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		cm := getConfigMap(t)
		return cm != nil && cm.UID != first.UID, nil
	})
	if err != nil {
		t.Fatalf("ConfigMap not recreated: %v", err)
	}
}
