package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
	"github.com/kubeboot/kubeboot/kubeboottest"
	"github.com/kubeboot/kubeboot/test/harness"
)

const (
	hookAPIServerAddr = "198.51.100.1"
	// hookAddr is the webhook server's address: an EndpointSlice cannot
	// point at loopback.
	hookAddr      = "198.51.100.60"
	hookNamespace = "webhooks"
	hookService   = "hook"
)

// TestAdmissionWebhooks registers a mutating and a validating webhook
// served behind a Service (reached, as kube-apiserver reaches it, through
// the Service's EndpointSlice, with TLS verified against the caBundle) and
// checks that the server calls both on a create: the mutation is stored,
// a denial reaches the client with the webhook's message and nothing is
// stored.
func TestAdmissionWebhooks(t *testing.T) {
	if !harness.InNetNS(t, hookAPIServerAddr, hookAddr) {
		return
	}
	ctx := t.Context()
	srv := kubeboottest.Start(t, kubeboottest.Options{
		BindAddress:      net.ParseIP(hookAPIServerAddr),
		AdvertiseAddress: net.ParseIP(hookAPIServerAddr),
	})
	client := kubernetes.NewForConfigOrDie(srv.Config)

	caBundle, calls, port := startWebhookServer(t)
	registerWebhooks(ctx, t, client, caBundle, port)

	// Webhook configurations, Services and EndpointSlices reach the
	// admission chain through separate informers: until all have caught
	// up, a create may be admitted unmutated or fail (the webhook's
	// Service resolves to no endpoint yet, and its failure policy is
	// Fail). Wait until a create is mutated.
	cms := client.CoreV1().ConfigMaps(metav1.NamespaceDefault)
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; ; i++ {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", i)}}, metav1.CreateOptions{})
		if err == nil && cm.Labels["mutated-by"] == "kubeboot-test" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mutating webhook did not mutate a create within 15s (%d calls so far; last create: %v)", calls.Load(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	stored, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "allowed"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("allowed create: %v", err)
	}
	if stored.Labels["mutated-by"] != "kubeboot-test" {
		t.Errorf("stored labels = %v, want the webhook's mutated-by label", stored.Labels)
	}

	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "denied"}, Data: map[string]string{"forbidden": "x"}}, metav1.CreateOptions{})
	want := `admission webhook "deny.kubeboot.test" denied the request: the key "forbidden" is not allowed`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("denied create: %v, want an error containing %q", err, want)
	}
	if _, err := cms.Get(ctx, "denied", metav1.GetOptions{}); err == nil {
		t.Error("the denied ConfigMap was stored")
	}
}

// startWebhookServer serves /mutate and /validate over TLS on hookAddr,
// with a certificate for the Service's DNS name, and returns the CA that
// signed it, a counter of calls and the port.
func startWebhookServer(t *testing.T) ([]byte, *atomic.Int64, int32) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pki")
	ca, err := pki.EnsureCA(dir, "webhook-ca")
	if err != nil {
		t.Fatal(err)
	}
	// The apiserver verifies the name it dials: <service>.<namespace>.svc.
	if _, err := pki.EnsureServing(dir, "webhook", ca, pki.ServingSpec{
		CommonName: hookService + "." + hookNamespace + ".svc",
		DNSNames:   []string{hookService + "." + hookNamespace + ".svc"},
	}); err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "webhook.crt"), filepath.Join(dir, "webhook.key"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	calls := &atomic.Int64{}
	mux := http.NewServeMux()
	mux.HandleFunc("/mutate", reviewHandler(t, calls, func(cm *corev1.ConfigMap, resp *admissionv1.AdmissionResponse) {
		patch := `[{"op":"add","path":"/metadata/labels","value":{"mutated-by":"kubeboot-test"}}]`
		if cm.Labels != nil {
			patch = `[{"op":"add","path":"/metadata/labels/mutated-by","value":"kubeboot-test"}]`
		}
		resp.Patch = []byte(patch)
		resp.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
	}))
	mux.HandleFunc("/validate", reviewHandler(t, calls, func(cm *corev1.ConfigMap, resp *admissionv1.AdmissionResponse) {
		if _, bad := cm.Data["forbidden"]; bad {
			resp.Allowed = false
			resp.Result = &metav1.Status{Message: `the key "forbidden" is not allowed`}
		}
	}))
	l, err := tls.Listen("tcp", net.JoinHostPort(hookAddr, "0"), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { _ = hs.Close() })
	return caPEM, calls, int32(l.Addr().(*net.TCPAddr).Port)
}

// reviewHandler decodes an AdmissionReview of a ConfigMap, lets decide
// fill in the response (allowed unless it says otherwise) and answers.
func reviewHandler(t *testing.T, calls *atomic.Int64, decide func(*corev1.ConfigMap, *admissionv1.AdmissionResponse)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			t.Errorf("webhook got an undecodable review: %v", err)
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		var cm corev1.ConfigMap
		if err := json.Unmarshal(review.Request.Object.Raw, &cm); err != nil {
			t.Errorf("webhook got an undecodable ConfigMap: %v", err)
		}
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		decide(&cm, resp)
		review.Response, review.Request = resp, nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	}
}

// registerWebhooks creates the webhooks' Service and EndpointSlice and
// the Mutating- and ValidatingWebhookConfiguration for ConfigMap creates
// in the default namespace.
func registerWebhooks(ctx context.Context, t *testing.T, client kubernetes.Interface, caBundle []byte, port int32) {
	t.Helper()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hookNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services(hookNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: hookService},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(port)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices(hookNamespace).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: hookService + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: hookService}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{hookAddr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clientConfig := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{
			Service:  &admissionregistrationv1.ServiceReference{Namespace: hookNamespace, Name: hookService, Path: ptr.To(path), Port: ptr.To[int32](443)},
			CABundle: caBundle,
		}
	}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}}
	inDefault := &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: metav1.NamespaceDefault}}
	none := ptr.To(admissionregistrationv1.SideEffectClassNone)
	if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "label"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "label.kubeboot.test", ClientConfig: clientConfig("/mutate"), Rules: rules, NamespaceSelector: inDefault,
			SideEffects: none, AdmissionReviewVersions: []string{"v1"}, FailurePolicy: ptr.To(admissionregistrationv1.Fail),
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "deny"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "deny.kubeboot.test", ClientConfig: clientConfig("/validate"), Rules: rules, NamespaceSelector: inDefault,
			SideEffects: none, AdmissionReviewVersions: []string{"v1"}, FailurePolicy: ptr.To(admissionregistrationv1.Fail),
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
