package envtest_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/kubeboottest/envtest"
)

const gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  names: {kind: Gadget, plural: gadgets, singular: gadget, listKind: GadgetList}
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

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func start(t *testing.T, env *envtest.Environment) *rest.Config {
	t.Helper()
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return cfg
}

// TestCRDSources: CRDs from a directory, a single file and objects are
// installed and served when Start returns; Environment.CRDs lists them.
func TestCRDSources(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "gadgets.yaml", gadgetCRD)
	writeFile(t, dir, "kustomization.yaml", "resources:\n- gadgets.yaml\n")
	single := writeFile(t, t.TempDir(), "widgets.yaml", strings.NewReplacer("gadget", "widget", "Gadget", "Widget").Replace(gadgetCRD))
	thing := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "things.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Thing", Plural: "things", ListKind: "ThingList"},
			Scope: apiextensionsv1.ClusterScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
	env := &envtest.Environment{
		CRDDirectoryPaths: []string{dir, filepath.Join(dir, "missing")},
		CRDInstallOptions: envtest.CRDInstallOptions{Paths: []string{single}},
		CRDs:              []*apiextensionsv1.CustomResourceDefinition{thing},
	}
	cfg := start(t, env)
	client := kubernetes.NewForConfigOrDie(cfg)
	resources, err := client.Discovery().ServerResourcesForGroupVersion("example.com/v1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range resources.APIResources {
		names = append(names, r.Name)
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "gadgets") || !strings.Contains(got, "widgets") || !strings.Contains(got, "things") {
		t.Errorf("example.com/v1 serves %s, want gadgets, widgets and things", got)
	}
	if len(env.CRDs) != 3 {
		t.Errorf("Environment.CRDs after Start: %d, want the 3 installed", len(env.CRDs))
	}
	if len(env.KubeConfig) == 0 {
		t.Error("Environment.KubeConfig is empty after Start")
	}
}

// TestCRDErrors: a CRD that cannot be read or that the server refuses
// fails Start with the file, the object and the reason; a missing path is
// an error with ErrorIfCRDPathMissing.
func TestCRDErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		env  *envtest.Environment
		want []string
	}{{
		name: "malformed",
		env:  &envtest.Environment{CRDDirectoryPaths: []string{writeFile(t, dir, "broken.yaml", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: [\n")}},
		want: []string{"broken.yaml"},
	}, {
		name: "refused by the server",
		env: &envtest.Environment{CRDDirectoryPaths: []string{writeFile(t, dir, "refused.yaml",
			strings.Replace(gadgetCRD, "scope: Namespaced", "scope: Everywhere", 1))}},
		want: []string{"refused.yaml", "gadgets.example.com", "spec.scope", "Unsupported value"},
	}, {
		name: "missing path",
		env:  &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join(dir, "nowhere")}, ErrorIfCRDPathMissing: true},
		want: []string{"nowhere", "no such file"},
	}, {
		name: "existing cluster",
		env:  &envtest.Environment{UseExistingCluster: ptr.To(true)},
		want: []string{"UseExistingCluster"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.env.Start()
			if err == nil {
				_ = tc.env.Stop()
				t.Fatal("Start succeeded")
			}
			t.Logf("Start: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Start error %q does not contain %q", err, w)
				}
			}
			if tc.env.Server != nil {
				t.Error("a failed Start left a server")
			}
		})
	}
}

// TestEnvtestDefaults: as on controller-runtime's envtest, a Pod is
// created in a new namespace that has no default ServiceAccount (no
// controller manager makes one), privileged containers included.
func TestEnvtestDefaults(t *testing.T) {
	cfg := start(t, &envtest.Environment{})
	ctx := context.Background()
	client := kubernetes.NewForConfigOrDie(cfg)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	privileged := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "fresh"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
			SecurityContext: &corev1.SecurityContext{Privileged: &privileged}}}},
	}
	if _, err := client.CoreV1().Pods("fresh").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Errorf("creating a privileged Pod in a namespace without a default ServiceAccount: %v", err)
	}
}

// TestAddUser: a provisioned user authenticates as itself and RBAC
// applies to it.
func TestAddUser(t *testing.T) {
	env := &envtest.Environment{}
	cfg := start(t, env)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cfg)
	user, err := env.AddUser(envtest.User{Name: "alice", Groups: []string{"readers"}}, &rest.Config{QPS: 100, Burst: 200})
	if err != nil {
		t.Fatal(err)
	}
	alice := kubernetes.NewForConfigOrDie(user.Config())
	review, err := alice.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info := review.Status.UserInfo; info.Username != "alice" || !strings.Contains(strings.Join(info.Groups, ","), "readers") {
		t.Errorf("whoami: %+v, want alice in readers", info)
	}
	if _, err := alice.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing ConfigMaps before any grant: %v, want Forbidden", err)
	}
	// Not the aggregated "view": its rules come from the controller
	// manager's aggregation controller, which does not run here.
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "readers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "configmap-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "readers"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC authorizes from informers: the binding takes effect once they
	// see it, as with kube-apiserver.
	var listErr error
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, listErr = alice.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		return listErr == nil, nil
	}); err != nil {
		t.Errorf("listing ConfigMaps as a reader: %v", listErr)
	}
	if _, err := alice.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("creating a ConfigMap as a reader: %v, want Forbidden", err)
	}
}

// TestMutatingWebhookAnyHandler: a MutatingWebhookConfiguration given as
// an object, naming a Service as a manifest would, is pointed at the
// local server; a plain net/http handler serving with the generated
// certificate in LocalServingCertDir is called and its patch applied.
func TestMutatingWebhookAnyHandler(t *testing.T) {
	path := "/mutate-configmaps"
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	env := &envtest.Environment{WebhookInstallOptions: envtest.WebhookInstallOptions{
		MutatingWebhooks: []*admissionregistrationv1.MutatingWebhookConfiguration{{
			ObjectMeta: metav1.ObjectMeta{Name: "label-configmaps"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name:                    "label.kubeboot.test",
				AdmissionReviewVersions: []string{"v1"},
				SideEffects:             &none,
				FailurePolicy:           &fail,
				ClientConfig: admissionregistrationv1.WebhookClientConfig{
					Service: &admissionregistrationv1.ServiceReference{Namespace: "system", Name: "webhook-service", Path: &path},
				},
				Rules: []admissionregistrationv1.RuleWithOperations{{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				}},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "default"}},
			}},
		}},
	}}
	cfg := start(t, env)
	hooks := env.WebhookInstallOptions
	called := make(chan struct{}, 10)
	mux := http.NewServeMux()
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		review := &admissionv1.AdmissionReview{}
		if err := json.NewDecoder(r.Body).Decode(review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		called <- struct{}{}
		patch := admissionv1.PatchTypeJSONPatch
		review.Response = &admissionv1.AdmissionResponse{
			UID: review.Request.UID, Allowed: true, PatchType: &patch,
			Patch: []byte(`[{"op":"add","path":"/metadata/labels","value":{"mutated":"yes"}}]`),
		}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	})
	srv := &http.Server{Addr: net.JoinHostPort(hooks.LocalServingHost, strconv.Itoa(hooks.LocalServingPort)), Handler: mux}
	go func() {
		_ = srv.ListenAndServeTLS(filepath.Join(hooks.LocalServingCertDir, "tls.crt"), filepath.Join(hooks.LocalServingCertDir, "tls.key"))
	}()
	t.Cleanup(func() { _ = srv.Close() })

	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	var created *corev1.ConfigMap
	// The handler's server may take a moment to listen; the webhook
	// fails closed until it does. And as with kube-apiserver, a webhook
	// configuration is in effect once the apiserver's informer has it,
	// a moment after it can be read: Start waits for the one, not the
	// other (controller-runtime's WaitForWebhooks), so a create just after
	// Start may still pass unmutated on a loaded machine.
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		created, err = client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "mutated-"}}, metav1.CreateOptions{})
		return err == nil && created.Labels["mutated"] == "yes", nil
	})
	if err != nil {
		labels := map[string]string(nil)
		if created != nil {
			labels = created.Labels
		}
		t.Fatalf("creating a ConfigMap the webhook labels mutated=yes: %v (last labels %v)", err, labels)
	}
	if len(called) == 0 {
		t.Error("the handler was not called")
	}
	stored, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "label-configmaps", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cc := stored.Webhooks[0].ClientConfig
	if cc.Service != nil || cc.URL == nil || !strings.HasSuffix(*cc.URL, path) || len(cc.CABundle) == 0 {
		t.Errorf("stored client config %+v, want a URL ending in %s and a CA bundle", cc, path)
	}
}

// TestFreePort: webhook ports come from below the ephemeral range, are
// free, and are not handed out twice.
func TestFreePort(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		hooks := &envtest.WebhookInstallOptions{LocalServingCertDir: t.TempDir()}
		if err := hooks.PrepWithoutInstalling(); err != nil {
			t.Fatal(err)
		}
		port := hooks.LocalServingPort
		if port < 20000 || port >= 32768 || seen[port] {
			t.Fatalf("port %d: want one in 20000-32767 not handed out before", port)
		}
		seen[port] = true
		l, err := net.Listen("tcp", net.JoinHostPort(hooks.LocalServingHost, strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", port, err)
		}
		l.Close()
	}
}
