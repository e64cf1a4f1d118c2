package crdinstall_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/apiserver/crdinstall"
	"github.com/kubeboot/kubeboot/internal/platform/progress/progresstest"
	"github.com/kubeboot/kubeboot/kubeboottest"
)

// crdYAML is a CRD for group example.com with the given kind; plural is
// the lower-case kind plus "s".
func crdYAML(kind string) string {
	plural := strings.ToLower(kind) + "s"
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ` + plural + `.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {kind: ` + kind + `, plural: ` + plural + `, singular: ` + strings.ToLower(kind) + `, listKind: ` + kind + `List}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, minimum: 1}
`
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		want    []string // CRD names, in order
		wantErr string
	}{
		{
			name: "several files, several documents, other kinds and files skipped",
			files: map[string]string{
				"b.yaml":             crdYAML("Widget") + "---\n# only a comment\n---\n" + crdYAML("Gadget"),
				"a.yml":              crdYAML("Sprocket"),
				"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [b.yaml]\n",
				"README.md":          "not a manifest",
			},
			want: []string{"sprockets.example.com", "widgets.example.com", "gadgets.example.com"},
		},
		{
			name:  "json",
			files: map[string]string{"c.json": `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"things.example.com"},"spec":{"group":"example.com","names":{"kind":"Thing","plural":"things"},"scope":"Cluster","versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object"}}}]}}`},
			want:  []string{"things.example.com"},
		},
		{
			name:  "empty directory",
			files: map[string]string{},
		},
		{
			name:    "v1beta1 is not served",
			files:   map[string]string{"old.yaml": strings.Replace(crdYAML("Widget"), "apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1", 1)},
			wantErr: `old.yaml:1 (document 1): apiVersion "apiextensions.k8s.io/v1beta1" is not served`,
		},
		{
			name:    "unknown field",
			files:   map[string]string{"typo.yaml": strings.Replace(crdYAML("Widget"), "scope:", "scopes: x\n  scope:", 1)},
			wantErr: `typo.yaml:1 (document 1): error unmarshaling JSON: while decoding JSON: json: unknown field "scopes"`,
		},
		{
			name:    "malformed YAML",
			files:   map[string]string{"bad.yaml": "apiVersion: apiextensions.k8s.io/v1\nkind: [CustomResourceDefinition\n"},
			wantErr: "bad.yaml:1 (document 1): error converting YAML to JSON",
		},
		{
			name:    "no name",
			files:   map[string]string{"anon.yaml": strings.Replace(crdYAML("Widget"), "name: widgets.example.com", "labels: {}", 1)},
			wantErr: "anon.yaml:1 (document 1): metadata.name: Required value",
		},
		{
			name:    "defined twice",
			files:   map[string]string{"a.yaml": crdYAML("Widget"), "b.yaml": crdYAML("Widget")},
			wantErr: `b.yaml:1 (document 1): CustomResourceDefinition "widgets.example.com" is also defined in`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			crds, err := crdinstall.Load(dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Load error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			var got []string
			for _, c := range crds {
				got = append(got, c.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("Load = %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := crdinstall.Load(filepath.Join(t.TempDir(), "missing")); !os.IsNotExist(err) {
		t.Errorf("Load of a missing directory = %v, want a not-exist error", err)
	}
}

// TestStartWithCRDDir starts a server with CRDs installed, as envtest users
// do: the first request after Start must find them.
func TestStartWithCRDDir(t *testing.T) {
	dir := writeFiles(t, map[string]string{"crds.yaml": crdYAML("Widget") + "---\n" + crdYAML("Gadget")})
	// A data dir of the test's: the server restarts on it below.
	dataDir := t.TempDir()
	var steps progresstest.Recorder
	srv := kubeboottest.Start(t, kubeboottest.Options{CRDDir: dir, DataDir: dataDir,
		Configure: func(c *controlplane.Config) { c.Progress = steps.Report }})
	ctx := context.Background()
	// Each step counted the two CRDs up and ended.
	for _, step := range []string{"applying CRDs", "CRDs established"} {
		var got []int64
		for _, u := range steps.Updates(step) {
			got = append(got, u.Done)
		}
		if want := []int64{0, 1, 2}; !slices.Equal(got, want) {
			t.Errorf("progress of %q: done %v, want %v", step, got, want)
		}
	}

	disco := discovery.NewDiscoveryClientForConfigOrDie(srv.Config)
	resources, err := disco.ServerResourcesForGroupVersion("example.com/v1")
	if err != nil {
		t.Fatalf("discovery of example.com/v1 right after Start: %v", err)
	}
	if len(resources.APIResources) < 2 {
		t.Errorf("example.com/v1 resources = %v, want widgets and gadgets", resources.APIResources)
	}
	dyn := dynamic.NewForConfigOrDie(srv.Config)
	widgets := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).Namespace("default")
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1"},
		"spec":     map[string]any{"size": int64(0)},
	}}
	if _, err := widgets.Create(ctx, w, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1") {
		t.Errorf("creating a widget of size 0: err = %v, want the schema's minimum message", err)
	}
	w.Object["spec"] = map[string]any{"size": int64(3)}
	if _, err := widgets.Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a widget: %v", err)
	}

	// The installer owns the fields it applied, so editing a file and
	// restarting updates the CRD.
	client := apiextensionsclient.NewForConfigOrDie(srv.Config)
	crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var managers []string
	for _, m := range crd.ManagedFields {
		managers = append(managers, m.Manager)
	}
	if !strings.Contains(strings.Join(managers, ","), crdinstall.FieldManager) {
		t.Errorf("managed fields of widgets.example.com: managers %v, want %s", managers, crdinstall.FieldManager)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(crdYAML("Widget"), "minimum: 1", "minimum: 5", 1)
	if err := os.WriteFile(filepath.Join(dir, "crds.yaml"), []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	srv = kubeboottest.Start(t, kubeboottest.Options{CRDDir: dir, DataDir: dataDir})
	client = apiextensionsclient.NewForConfigOrDie(srv.Config)
	crd, err = client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	min := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["size"].Minimum
	if min == nil || *min != 5 {
		t.Errorf("after restart with an edited file, spec.size minimum = %v, want 5", min)
	}
	// A CRD no longer in the directory is left alone: it may hold objects.
	if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "gadgets.example.com", metav1.GetOptions{}); err != nil {
		t.Errorf("gadgets.example.com after it left the directory: %v", err)
	}
}

// TestStartWithRefusedCRD checks a CRD the server refuses fails Start with
// the server's reason and the file, instead of hanging or exiting the
// process.
func TestStartWithRefusedCRD(t *testing.T) {
	// Valid YAML, but the name must be <plural>.<group>.
	bad := strings.Replace(crdYAML("Widget"), "name: widgets.example.com", "name: widgets.other.com", 1)
	dir := writeFiles(t, map[string]string{"bad.yaml": bad})
	start := time.Now()
	var steps progresstest.Recorder
	_, err := kubeboottest.StartServer(kubeboottest.Options{CRDDir: dir,
		Configure: func(c *controlplane.Config) { c.Progress = steps.Report }})
	if err == nil {
		t.Fatal("StartServer with a refused CRD succeeded")
	}
	if updates := steps.Updates("applying CRDs"); len(updates) == 0 || !updates[len(updates)-1].End || updates[len(updates)-1].Done != 0 {
		t.Errorf("the refused step's updates %+v, want the last to end it at 0", updates)
	}
	for _, want := range []string{"--crd-dir", "bad.yaml", `CustomResourceDefinition.apiextensions.k8s.io "widgets.other.com" is invalid`, "metadata.name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("StartServer error %q does not contain %q", err, want)
		}
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("StartServer took %s to fail", d)
	}
}

// patchCounter counts the PATCH requests that pass through it.
type patchCounter struct {
	rt      http.RoundTripper
	patches atomic.Int64
}

func (c *patchCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPatch {
		c.patches.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// TestInstallUnchanged: installing CRDs the server already holds as the
// files say (the Gateway API's, with their defaults and CEL rules, and a
// plain one) sends no apply; a CRD whose file changed is applied, and a
// field of it a user changed is put back.
func TestInstallUnchanged(t *testing.T) {
	gatewayCRDs, err := crdinstall.Load(filepath.Join("..", "..", "components", "gateway", "crds", "standard"))
	if err != nil {
		t.Fatal(err)
	}
	widget, err := crdinstall.Parse("widget.yaml", []byte(crdYAML("Widget")))
	if err != nil {
		t.Fatal(err)
	}
	crds := append(gatewayCRDs, widget...)
	srv := kubeboottest.Start(t, kubeboottest.Options{})
	config := rest.CopyConfig(srv.Config)
	counter := &patchCounter{}
	config.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.rt = rt; return counter })
	ext := apiextensionsclient.NewForConfigOrDie(config)
	ctx := context.Background()
	install := func(crds []crdinstall.CRD) int64 {
		t.Helper()
		before := counter.patches.Load()
		if err := crdinstall.Install(ctx, ext.ApiextensionsV1(), ext.Discovery(), crds, nil); err != nil {
			t.Fatal(err)
		}
		return counter.patches.Load() - before
	}

	if n := install(crds); n != int64(len(crds)) {
		t.Errorf("first install of %d CRDs: %d applied", len(crds), n)
	}
	if n := install(crds); n != 0 {
		t.Errorf("installing the same %d CRDs again: %d applied, want none", len(crds), n)
	}
	edited, err := crdinstall.Parse("widget.yaml", []byte(strings.Replace(crdYAML("Widget"), "minimum: 1", "minimum: 5", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if n := install(append(gatewayCRDs, edited...)); n != 1 {
		t.Errorf("installing with the widget's file edited: %d applied, want 1", n)
	}
	// A user's change to a field the installer owns is put back.
	patch := []byte(`[{"op":"replace","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size/minimum","value":9}]`)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, "widgets.example.com", types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := install(append(gatewayCRDs, edited...)); n != 1 {
		t.Errorf("installing after a user changed the widget's minimum: %d applied, want 1", n)
	}
	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if min := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["size"].Minimum; min == nil || *min != 5 {
		t.Errorf("spec.size minimum = %v, want the edited file's 5", min)
	}
}
