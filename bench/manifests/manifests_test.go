// Package manifests measures the manifests directory (issue 42): on a
// `kubeboot server`, 20 files dropped into <data-dir>/server/manifests at
// once, each a namespace with a Deployment, a Service, a ConfigMap and a
// Secret in it (100 objects), until every object is present; then the
// files removed, until every namespace is gone.
//
//	go test ./bench/manifests -run '^$' -bench . -benchtime 5x
package manifests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/internal/components/autodeploy"
	"github.com/kubeboot/kubeboot/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// files is how many files are dropped in at once.
const files = 20

// manifest is one file: a namespace and four objects in it.
const manifest = `apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: %[1]s
spec:
  replicas: 0
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: %[1]s
spec:
  selector: {app: web}
  ports:
  - port: 80
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: %[1]s
data:
  level: "1"
---
apiVersion: v1
kind: Secret
metadata:
  name: token
  namespace: %[1]s
stringData:
  token: not-a-secret
`

func BenchmarkApply(b *testing.B) {
	bin, err := harness.Binary()
	if err != nil {
		b.Fatal(err)
	}
	dataDir := filepath.Join(b.TempDir(), "data")
	srv := harness.StartReadyServer(b, time.Minute, bin, dataDir, "--bind-address", "127.0.0.1", "--secure-port", "0")
	client := srv.MustClient(b)
	dir := autodeploy.Dir(dataDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var applied, removed []time.Duration
	b.ResetTimer()
	for i := range b.N {
		var names []string
		start := time.Now()
		for f := range files {
			name := fmt.Sprintf("bench-%d-%d", i, f)
			names = append(names, name)
			if err := os.WriteFile(filepath.Join(dir, name+".yaml"), fmt.Appendf(nil, manifest, name), 0o600); err != nil {
				b.Fatal(err)
			}
		}
		waitAll(b, "applied", func(ns string) (bool, error) {
			_, err := client.CoreV1().Secrets(ns).Get(ctx, "token", metav1.GetOptions{})
			return err == nil, ignoreNotFound(err)
		}, names)
		applied = append(applied, time.Since(start))
		countObjects(b, client, names)

		start = time.Now()
		for _, name := range names {
			if err := os.Remove(filepath.Join(dir, name+".yaml")); err != nil {
				b.Fatal(err)
			}
		}
		waitAll(b, "removed", func(ns string) (bool, error) {
			_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), ignoreNotFound(err)
		}, names)
		removed = append(removed, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(median(applied).Seconds()*1000, "ms-applied")
	b.ReportMetric(median(removed).Seconds()*1000, "ms-removed")
	b.Logf("%d files of 5 objects: applied %v, removed (namespaces gone) %v", files, applied, removed)
}

// waitAll waits until done holds for every namespace; the last file's
// Secret is its last object.
func waitAll(b *testing.B, what string, done func(ns string) (bool, error), namespaces []string) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for _, ns := range namespaces {
		for {
			ok, err := done(ns)
			if err != nil {
				b.Fatal(err)
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s: %s not within 5 minutes", ns, what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// countObjects checks that each namespace holds all four of its objects.
func countObjects(b *testing.B, client kubernetes.Interface, namespaces []string) {
	b.Helper()
	ctx := context.Background()
	for _, ns := range namespaces {
		_, e1 := client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		_, e2 := client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		_, e3 := client.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
		for _, err := range []error{e1, e2, e3} {
			if err != nil {
				b.Fatalf("%s: %v", ns, err)
			}
		}
	}
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
