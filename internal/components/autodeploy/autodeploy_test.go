package autodeploy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/components/autodeploy"
	"github.com/kubeboot/kubeboot/kubeboottest"
)

const app = `apiVersion: v1
kind: Namespace
metadata:
  name: app
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: app
data:
  level: "%s"
%s---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
  namespace: app
spec:
  size: 3
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

// gone is a ConfigMap app.yaml holds at first, then no longer.
const gone = `---
apiVersion: v1
kind: ConfigMap
metadata:
  name: gone
  namespace: app
`

func configMap(name string, data ...string) string {
	s := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n", name)
	if len(data) > 0 {
		s += "data:\n"
		for _, d := range data {
			s += "  " + d + "\n"
		}
	}
	return s
}

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// TestManifests: files added, changed, broken, skipped and removed in the
// manifests directory, and a restart.
func TestManifests(t *testing.T) {
	dataDir := t.TempDir()
	start := func() *kubeboottest.Server {
		return kubeboottest.Start(t, kubeboottest.Options{DataDir: dataDir, Configure: func(c *controlplane.Config) {
			c.Components = append(c.Components, autodeploy.New([]string{"disabled"}))
		}})
	}
	s := start()
	dir := autodeploy.Dir(s.DataDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(s.Config)
	dyn := dynamic.NewForConfigOrDie(s.Config)
	ctx := t.Context()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	configMapData := func(ns, name string) (map[string]string, bool) {
		cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data, true
	}
	exists := func(ns, name string) func() bool {
		return func() bool { _, ok := configMapData(ns, name); return ok }
	}

	// Added: a namespace, a CustomResourceDefinition and a resource of its
	// kind written before it.
	write("app.yaml", fmt.Sprintf(app, "1", gone))
	waitFor(t, "app.yaml applied", func() bool {
		_, err := dyn.Resource(widgets).Namespace("app").Get(ctx, "w1", metav1.GetOptions{})
		return err == nil && exists("app", "gone")()
	})
	waitEvent(t, client, "app.yaml", autodeploy.ReasonApplied, "applied 5 objects, deleted 0")

	// Changed: a value, and an object no longer held.
	write("app.yaml", fmt.Sprintf(app, "2", ""))
	waitFor(t, "app.yaml applied again", func() bool {
		data, _ := configMapData("app", "settings")
		return data["level"] == "2" && !exists("app", "gone")()
	})

	// A broken file beside a good one: nothing of it applies, the event
	// names its file and line.
	write("broken.yaml", configMap("broken-1")+"---\n# the second\nkind: [ConfigMap\n")
	write("good.yaml", configMap("good"))
	waitFor(t, "good.yaml applied", exists("default", "good"))
	waitEvent(t, client, "broken.yaml", autodeploy.ReasonInvalid, "broken.yaml:6 (document 2): error converting YAML to JSON: yaml: line 2")

	// A kind the server does not serve.
	write("unknown.yaml", configMap("unknown-1")+"---\napiVersion: example.com/v1\nkind: Gizmo\nmetadata:\n  name: g\n")
	waitEvent(t, client, "unknown.yaml", autodeploy.ReasonUnknownKind, "the server serves no kind Gizmo in example.com/v1")

	// An object another field manager owns a field of.
	theirs := applycorev1.ConfigMap("owned", "default").WithData(map[string]string{"k": "theirs"})
	if _, err := client.CoreV1().ConfigMaps("default").Apply(ctx, theirs, metav1.ApplyOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	write("conflict.yaml", configMap("conflict-1")+"---\n"+configMap("owned", `k: "ours"`))
	waitEvent(t, client, "conflict.yaml", autodeploy.ReasonRefused, "conflict")

	// Skipped: by NAME.skip, and by --disable.
	write("skipped.yaml.skip", "")
	write("skipped.yaml", configMap("skipped"))
	write("disabled.yaml", configMap("disabled"))
	time.Sleep(2 * time.Second)
	for _, name := range []string{"broken-1", "unknown-1", "conflict-1", "skipped", "disabled"} {
		if exists("default", name)() {
			t.Errorf("ConfigMap %s applied", name)
		}
	}
	if data, _ := configMapData("default", "owned"); data["k"] != "theirs" {
		t.Errorf("owned's data %v: the conflicting apply took it", data)
	}
	if err := os.Remove(filepath.Join(dir, "skipped.yaml.skip")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "skipped.yaml applied once not skipped", exists("default", "skipped"))

	// Removed: its objects are deleted, the namespace's and the
	// definition's with them, and its record.
	if err := os.Remove(filepath.Join(dir, "app.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "app.yaml's objects deleted", func() bool {
		_, err := client.CoreV1().Namespaces().Get(ctx, "app", metav1.GetOptions{})
		crds, _ := client.Discovery().ServerResourcesForGroupVersion("example.com/v1")
		_, recErr := client.CoreV1().ConfigMaps(autodeploy.Namespace).Get(ctx, "manifest-app.yaml", metav1.GetOptions{})
		return apierrors.IsNotFound(err) && crds == nil && apierrors.IsNotFound(recErr)
	})

	// Another server's file, which this one's directory lacks: left to
	// that server. (Its record, as that server wrote it.)
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().ConfigMaps(autodeploy.Namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "manifest-elsewhere.yaml", Labels: map[string]string{autodeploy.FileLabel: ""}},
		Data: map[string]string{"file": "elsewhere.yaml", "checksum": "0", "server": "198.51.100.9",
			"objects": `[{"apiVersion":"v1","kind":"ConfigMap","namespace":"default","name":"elsewhere"}]`},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A restart applies nothing twice: zz-last.yaml, written while the
	// server is down, is taken last in its first pass (the files are
	// synced a few at a time: the others are given two seconds more).
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	write("zz-last.yaml", configMap("last"))
	s = start()
	client = kubernetes.NewForConfigOrDie(s.Config)
	waitFor(t, "zz-last.yaml applied after the restart", exists("default", "last"))
	time.Sleep(2 * time.Second)
	for _, file := range []string{"good.yaml", "skipped.yaml"} {
		if n := countEvents(t, client, file, autodeploy.ReasonApplied); n != 1 {
			t.Errorf("%s applied %d times, want once", file, n)
		}
	}
	if !exists("default", "elsewhere")() {
		t.Error("another server's file's ConfigMap was deleted")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// events are the events on file's record with reason.
func events(t *testing.T, client kubernetes.Interface, file, reason string) []corev1.Event {
	t.Helper()
	list, err := client.CoreV1().Events(autodeploy.Namespace).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=manifest-" + file + ",reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// countEvents is how many times an event with reason was reported on
// file's record.
func countEvents(t *testing.T, client kubernetes.Interface, file, reason string) int {
	t.Helper()
	n := 0
	for _, e := range events(t, client, file, reason) {
		n += max(int(e.Count), 1)
	}
	return n
}

// waitEvent waits for an event on file's record with reason whose message
// contains want.
func waitEvent(t *testing.T, client kubernetes.Interface, file, reason, want string) {
	t.Helper()
	var got []string
	waitFor(t, fmt.Sprintf("%s: event %s %q", file, reason, want), func() bool {
		got = got[:0]
		for _, e := range events(t, client, file, reason) {
			if strings.Contains(e.Message, want) {
				return true
			}
			got = append(got, e.Message)
		}
		return false
	})
}
