package integration

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubeboot/kubeboot/kubeboottest"
	"github.com/kubeboot/kubeboot/test/extensionapiserver"
	"github.com/kubeboot/kubeboot/test/harness"
)

const (
	// aggAPIServerAddr and aggExtensionAddr are the addresses of kubeboot
	// and of the extension apiserver in the test's network namespace: an
	// EndpointSlice cannot point at loopback.
	aggAPIServerAddr = "198.51.100.1"
	aggExtensionAddr = "198.51.100.50"
	// aggNamespace holds the extension apiserver's Service.
	aggNamespace   = "wardle"
	aggServiceName = "api"
	// aggPoll is how often conditions are polled.
	aggPoll = 20 * time.Millisecond
)

var aggAPIServiceName = extensionapiserver.Version + "." + extensionapiserver.Group

// TestAggregatedAPIServer registers a real (small) extension apiserver
// with the aggregator through a Service and an EndpointSlice, and drives
// it with client-go and kubectl: availability, proxying, merged discovery,
// the front-proxy authentication contract, and what happens when the
// backend goes away and the APIService is deleted.
func TestAggregatedAPIServer(t *testing.T) {
	kubectl, err := harness.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	if !harness.InNetNS(t, aggAPIServerAddr, aggExtensionAddr) {
		return
	}
	begin := time.Now()
	ctx := t.Context()
	srv := kubeboottest.Start(t, kubeboottest.Options{
		BindAddress:      net.ParseIP(aggAPIServerAddr),
		AdvertiseAddress: net.ParseIP(aggAPIServerAddr),
	})
	t.Logf("kubeboot ready in %s", time.Since(begin).Round(time.Millisecond))
	client := kubernetes.NewForConfigOrDie(srv.Config)
	agg := aggregatorclient.NewForConfigOrDie(srv.Config)
	flunders := dynamic.NewForConfigOrDie(srv.Config).Resource(extensionapiserver.GroupVersionResource)
	k := &kubectlRunner{t: t, bin: kubectl, kubeconfig: srv.Kubeconfig, cacheDir: filepath.Join(t.TempDir(), "kubectl-cache")}
	// Requests through srv.Config are the super admin's (system:masters);
	// kubectl's, through the admin kubeconfig, kubeadm's admin's.
	adminKubeconfig, err := clientcmd.BuildConfigFromFlags("", srv.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	admins := map[string]string{
		certCommonName(t, srv.Config.CertData):      "system:masters",
		certCommonName(t, adminKubeconfig.CertData): "kubeadm:cluster-admins",
	}

	// The extension apiserver trusts what kubeboot publishes for it, as a
	// real one does: the front proxy's CA and allowed names.
	requestHeaderCA, allowedNames := requestHeaderConfig(ctx, t, client)
	ext, err := extensionapiserver.Start(extensionapiserver.Options{
		Address:         net.JoinHostPort(aggExtensionAddr, "0"),
		RequestHeaderCA: requestHeaderCA,
		AllowedNames:    allowedNames,
		Flunders: []extensionapiserver.Flunder{
			newFlunder(metav1.NamespaceDefault, "alpha", "red"),
			newFlunder(metav1.NamespaceDefault, "beta", "blue"),
			newFlunder(aggNamespace, "gamma", "green"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ext.Close)
	t.Logf("extension apiserver serving on %s", ext.URL)

	// 1. Service, EndpointSlice and APIService; the APIService becomes
	// Available once the aggregator reached the backend's discovery.
	registerExtension(ctx, t, client, agg, ext.Port)
	registered := time.Now()
	took, cond := waitAPIServiceAvailable(ctx, t, agg, apiregistrationv1.ConditionTrue, 15*time.Second)
	t.Logf("APIService %s Available after %s (%s: %s)", aggAPIServiceName, took.Round(time.Millisecond), cond.Reason, cond.Message)

	// The group is in the merged aggregated discovery with its resources,
	// next to the built-in groups.
	waitAggregatedDiscovery(ctx, t, client, func(d map[string]apidiscoveryv2.APIVersionDiscovery) error {
		v, ok := d[extensionapiserver.GroupVersion.String()]
		if !ok {
			return errors.New("group version not in discovery")
		}
		if v.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
			return fmt.Errorf("freshness %q", v.Freshness)
		}
		if !slices.ContainsFunc(v.Resources, func(r apidiscoveryv2.APIResourceDiscovery) bool {
			return r.Resource == extensionapiserver.Resource && r.ResponseKind != nil && r.ResponseKind.Kind == extensionapiserver.Kind &&
				r.Scope == apidiscoveryv2.ScopeNamespace && slices.Equal(r.ShortNames, []string{"fl"})
		}) {
			return fmt.Errorf("resources %+v lack flunders", v.Resources)
		}
		if _, ok := d["v1"]; !ok {
			return errors.New("core v1 not in discovery")
		}
		if _, ok := d["apiregistration.k8s.io/v1"]; !ok {
			return errors.New("apiregistration.k8s.io/v1 not in discovery")
		}
		return nil
	}, 15*time.Second)
	t.Logf("%s in the merged discovery %s after registration", extensionapiserver.GroupVersion, time.Since(registered).Round(time.Millisecond))
	// So does the legacy per-version document, proxied to the backend.
	if _, err := client.Discovery().ServerResourcesForGroupVersion(extensionapiserver.GroupVersion.String()); err != nil {
		t.Errorf("discovery of %s: %v", extensionapiserver.GroupVersion, err)
	}

	// 2. Reads through the proxy, with client-go and kubectl.
	list, err := flunders.Namespace(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing flunders through the aggregator: %v", err)
	}
	var names []string
	for _, i := range list.Items {
		names = append(names, i.GetName())
	}
	if !slices.Equal(names, []string{"alpha", "beta"}) {
		t.Errorf("flunders in default: %v, want [alpha beta]", names)
	}
	if _, err := flunders.Namespace(metav1.NamespaceDefault).Get(ctx, "nope", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("getting a missing flunder: %v, want the backend's NotFound", err)
	}

	out := k.ok("get", "flunders")
	assertTable(t, out, []string{"NAME", "COLOR", "AGE"}, [][]string{{"alpha", "red"}, {"beta", "blue"}})
	out = k.ok("get", "fl", "-A")
	assertTable(t, out, []string{"NAMESPACE", "NAME", "COLOR", "AGE"},
		[][]string{{"default", "alpha", "red"}, {"default", "beta", "blue"}, {aggNamespace, "gamma", "green"}})
	var got extensionapiserver.Flunder
	if err := yaml.UnmarshalStrict([]byte(k.ok("get", "flunder", "alpha", "-o", "yaml")), &got); err != nil {
		t.Errorf("kubectl get flunder alpha -o yaml: %v", err)
	}
	if got.APIVersion != extensionapiserver.GroupVersion.String() || got.Kind != extensionapiserver.Kind ||
		got.Name != "alpha" || got.Namespace != metav1.NamespaceDefault || got.Spec.Color != "red" || got.UID == "" {
		t.Errorf("kubectl get flunder alpha -o yaml: %+v", got)
	}
	_, stderr := k.fail("get", "flunder", "nope")
	if want := `Error from server (NotFound): flunders.wardle.kubeboot.test "nope" not found`; !strings.Contains(stderr, want) {
		t.Errorf("kubectl get flunder nope: stderr %q, want %q", stderr, want)
	}

	// 3. kubectl sees the merged discovery and the APIServices.
	out = k.ok("api-resources")
	assertRow(t, "kubectl api-resources", out, "flunders", "fl", "wardle.kubeboot.test/v1alpha1", "true", "Flunder")
	assertRow(t, "kubectl api-resources", out, "services", "svc", "v1", "true", "Service")
	assertRow(t, "kubectl api-resources", out, "apiservices", "apiregistration.k8s.io/v1", "false", "APIService")
	out = k.ok("get", "apiservices")
	assertRow(t, "kubectl get apiservices", out, aggAPIServiceName, aggNamespace+"/"+aggServiceName, "True")
	assertRow(t, "kubectl get apiservices", out, "v1.", "Local", "True")
	assertRow(t, "kubectl get apiservices", out, "v1.discovery.k8s.io", "Local", "True")

	// 4. The front-proxy contract. A client's own identity headers must
	// not get through, and an unauthenticated client not reach the
	// backend at all.
	spoofing := rest.CopyConfig(srv.Config)
	spoofing.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set("X-Remote-User", "mallory")
			r.Header.Set("X-Remote-Group", "evil")
			r.Header.Set("X-Remote-Extra-Scopes", "all")
			return rt.RoundTrip(r)
		})
	})
	if _, err := dynamic.NewForConfigOrDie(spoofing).Resource(extensionapiserver.GroupVersionResource).
		Namespace(aggNamespace).Get(ctx, "gamma", metav1.GetOptions{}); err != nil {
		t.Errorf("getting gamma with spoofed identity headers: %v", err)
	}
	before := len(ext.Requests())
	_, err = dynamic.NewForConfigOrDie(rest.AnonymousClientConfig(srv.Config)).Resource(extensionapiserver.GroupVersionResource).
		Namespace(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Errorf("anonymous list of flunders: %v, want Unauthorized", err)
	}
	// Only the list's own request counts: the aggregator fetches the
	// backend's OpenAPI and checks its availability meanwhile.
	for _, r := range ext.Requests()[before:] {
		if strings.Contains(r.Path, "/flunders") {
			t.Errorf("an anonymous request reached the backend: %+v", r)
		}
	}
	assertFrontProxy(t, ext.Requests(), admins, allowedNames)

	// 5. The backend goes away: requests through the proxy fail with 503
	// at once, and the availability check turns the APIService False.
	ext.Close()
	stopped := time.Now()
	_, err = flunders.Namespace(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("listing flunders with the backend stopped: %v, want ServiceUnavailable", err)
	}
	if _, stderr := k.fail("get", "flunders"); !strings.Contains(stderr, "(ServiceUnavailable)") {
		t.Errorf("kubectl get flunders with the backend stopped: stderr %q, want ServiceUnavailable", stderr)
	}
	// The remote availability controller re-checks an APIService when its
	// Service or EndpointSlices change, and else every 30 s. Here nothing
	// plays the endpoint controller that would update the slice when the
	// backend's pod goes, so the test touches the slice (the endpoint stays
	// ready: the check itself must find the backend dead).
	touchEndpointSlice(ctx, t, client)
	_, cond = waitAPIServiceAvailable(ctx, t, agg, apiregistrationv1.ConditionFalse, 15*time.Second)
	t.Logf("APIService Available=False %s after the backend stopped (%s: %s)", time.Since(stopped).Round(time.Millisecond), cond.Reason, cond.Message)
	if cond.Reason != "FailedDiscoveryCheck" {
		t.Errorf("Available=False reason %q, want FailedDiscoveryCheck", cond.Reason)
	}
	_, err = flunders.Namespace(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("listing flunders of an unavailable APIService: %v, want ServiceUnavailable", err)
	}
	out = k.ok("get", "apiservices")
	assertRow(t, "kubectl get apiservices", out, aggAPIServiceName, aggNamespace+"/"+aggServiceName, "False", "(FailedDiscoveryCheck)")

	// Deleting the APIService removes the group from discovery and from
	// the proxy.
	if err := agg.ApiregistrationV1().APIServices().Delete(ctx, aggAPIServiceName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	waitAggregatedDiscovery(ctx, t, client, func(d map[string]apidiscoveryv2.APIVersionDiscovery) error {
		if _, ok := d[extensionapiserver.GroupVersion.String()]; ok {
			return errors.New("group version still in discovery")
		}
		if _, ok := d["v1"]; !ok {
			return errors.New("core v1 not in discovery")
		}
		return nil
	}, 15*time.Second)
	t.Logf("%s gone from the merged discovery %s after the APIService was deleted", extensionapiserver.GroupVersion, time.Since(deleted).Round(time.Millisecond))
	groups, err := client.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(groups.Groups, func(g metav1.APIGroup) bool { return g.Name == extensionapiserver.Group }) {
		t.Errorf("group %s still listed in /apis after the APIService was deleted", extensionapiserver.Group)
	}
	if _, err := flunders.Namespace(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("listing flunders after the APIService was deleted: %v, want NotFound", err)
	}
	if out := k.ok("api-resources"); strings.Contains(out, "flunders") {
		t.Errorf("kubectl api-resources still lists flunders:\n%s", out)
	}
	if _, stderr := k.fail("get", "flunders"); !strings.Contains(stderr, `the server doesn't have a resource type "flunders"`) {
		t.Errorf("kubectl get flunders after the APIService was deleted: stderr %q", stderr)
	}
	t.Logf("whole test body took %s", time.Since(begin).Round(time.Millisecond))
}

func newFlunder(namespace, name, color string) extensionapiserver.Flunder {
	return extensionapiserver.Flunder{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       extensionapiserver.FlunderSpec{Color: color},
	}
}

// requestHeaderConfig reads the front proxy's CA and allowed names from
// kube-system/extension-apiserver-authentication, as an extension
// apiserver's delegated authentication does.
func requestHeaderConfig(ctx context.Context, t *testing.T, client kubernetes.Interface) (*x509.CertPool, []string) {
	t.Helper()
	var cm *corev1.ConfigMap
	err := pollUntil(ctx, 10*time.Second, func() error {
		var err error
		cm, err = client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := cm.Data["requestheader-allowed-names"]; !ok {
			return errors.New("no request header settings yet")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("extension-apiserver-authentication: %v", err)
	}
	if cm.Data["requestheader-client-ca-file"] == "" {
		// Then the aggregator has no proxy client certificate either, and
		// no extension apiserver can trust its X-Remote-User.
		t.Fatal("kube-system/extension-apiserver-authentication has request header settings but an empty requestheader-client-ca-file: kubeboot gives the aggregator no front-proxy CA")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(cm.Data["requestheader-client-ca-file"])) {
		t.Fatalf("requestheader-client-ca-file holds no certificate")
	}
	var names []string
	if err := json.Unmarshal([]byte(cm.Data["requestheader-allowed-names"]), &names); err != nil {
		t.Fatalf("requestheader-allowed-names %q: %v", cm.Data["requestheader-allowed-names"], err)
	}
	for key, want := range map[string]string{
		"requestheader-username-headers":     `["X-Remote-User"]`,
		"requestheader-group-headers":        `["X-Remote-Group"]`,
		"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
	} {
		if cm.Data[key] != want {
			t.Errorf("extension-apiserver-authentication %s = %q, want %q", key, cm.Data[key], want)
		}
	}
	return pool, names
}

// registerExtension creates the Service (whose port 443 targets the
// extension server's port), its EndpointSlice and the APIService.
func registerExtension(ctx context.Context, t *testing.T, client kubernetes.Interface, agg aggregatorclient.Interface, port int32) {
	t.Helper()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: aggNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := client.CoreV1().Services(aggNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: aggServiceName},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeClusterIP,
			Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Fatalf("service got no ClusterIP: %+v", svc.Spec)
	}
	_, err = client.DiscoveryV1().EndpointSlices(aggNamespace).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: aggServiceName + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: aggServiceName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{aggExtensionAddr},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = agg.ApiregistrationV1().APIServices().Create(ctx, &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: aggAPIServiceName},
		Spec: apiregistrationv1.APIServiceSpec{
			Group:                 extensionapiserver.Group,
			Version:               extensionapiserver.Version,
			Service:               &apiregistrationv1.ServiceReference{Namespace: aggNamespace, Name: aggServiceName, Port: ptr.To[int32](443)},
			InsecureSkipTLSVerify: true,
			GroupPriorityMinimum:  1000,
			VersionPriority:       15,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// touchEndpointSlice updates the extension's EndpointSlice without
// changing its endpoints.
func touchEndpointSlice(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"kubeboot.test/touched":%q}}}`, time.Now().Format(time.RFC3339Nano))
	if _, err := client.DiscoveryV1().EndpointSlices(aggNamespace).Patch(ctx, aggServiceName+"-1", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitAPIServiceAvailable polls until the APIService's Available condition
// has status want, and returns how long that took and the condition.
func waitAPIServiceAvailable(ctx context.Context, t *testing.T, agg aggregatorclient.Interface, want apiregistrationv1.ConditionStatus, timeout time.Duration) (time.Duration, apiregistrationv1.APIServiceCondition) {
	t.Helper()
	start := time.Now()
	var cond apiregistrationv1.APIServiceCondition
	err := pollUntil(ctx, timeout, func() error {
		s, err := agg.ApiregistrationV1().APIServices().Get(ctx, aggAPIServiceName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range s.Status.Conditions {
			if c.Type == apiregistrationv1.Available {
				cond = c
				if c.Status == want {
					return nil
				}
				return fmt.Errorf("Available=%s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		return fmt.Errorf("no Available condition: %+v", s.Status)
	})
	if err != nil {
		t.Fatalf("APIService %s not Available=%s after %s: %v", aggAPIServiceName, want, timeout, err)
	}
	return time.Since(start), cond
}

// waitAggregatedDiscovery polls /api and /apis as aggregated discovery
// (what kubectl reads) until check accepts their versions, keyed
// "group/version" ("v1" for the core group).
func waitAggregatedDiscovery(ctx context.Context, t *testing.T, client kubernetes.Interface, check func(map[string]apidiscoveryv2.APIVersionDiscovery) error, timeout time.Duration) {
	t.Helper()
	err := pollUntil(ctx, timeout, func() error {
		d := map[string]apidiscoveryv2.APIVersionDiscovery{}
		for _, path := range []string{"/api", "/apis"} {
			body, err := client.Discovery().RESTClient().Get().AbsPath(path).
				SetHeader("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList").DoRaw(ctx)
			if err != nil {
				return err
			}
			var list apidiscoveryv2.APIGroupDiscoveryList
			if err := json.Unmarshal(body, &list); err != nil {
				return err
			}
			if list.Kind != "APIGroupDiscoveryList" {
				return fmt.Errorf("%s answered %s/%s, not aggregated discovery", path, list.APIVersion, list.Kind)
			}
			for _, g := range list.Items {
				for _, v := range g.Versions {
					d[metav1.GroupVersion{Group: g.Name, Version: v.Version}.String()] = v
				}
			}
		}
		return check(d)
	})
	if err != nil {
		t.Fatalf("aggregated discovery after %s: %v", timeout, err)
	}
}

// assertFrontProxy checks every request the backend received came from
// the aggregator's front-proxy certificate, and that the admins' requests
// carried their identity (admins: each user's group) in the request
// headers, never a client's.
func assertFrontProxy(t *testing.T, reqs []extensionapiserver.Request, admins map[string]string, allowedNames []string) {
	t.Helper()
	if len(reqs) == 0 {
		t.Fatal("the backend received no requests")
	}
	var probes, asAdmin int
	for _, r := range reqs {
		if r.Status == http.StatusUnauthorized {
			t.Errorf("backend refused %s %s: certificates %v, headers %v", r.Method, r.Path, certNames(r.PeerCertificates), r.Header)
			continue
		}
		if len(r.PeerCertificates) == 0 || !slices.Contains(allowedNames, r.PeerCertificates[0].Subject.CommonName) {
			t.Errorf("%s %s: client certificates %v, want one of %v", r.Method, r.Path, certNames(r.PeerCertificates), allowedNames)
		}
		if r.Header.Get("Authorization") != "" {
			t.Errorf("%s %s: an Authorization header reached the backend", r.Method, r.Path)
		}
		switch group := admins[r.User]; {
		case r.User == "system:kube-aggregator":
			// The availability check and discovery.
			if r.Path == "/apis/"+extensionapiserver.GroupVersion.String() {
				probes++
			}
		case r.User == "system:aggregator":
			// The OpenAPI aggregation (this backend has no OpenAPI).
		case group != "":
			asAdmin++
			for _, g := range []string{group, "system:authenticated"} {
				if !slices.Contains(r.Groups, g) {
					t.Errorf("%s %s as %s: groups %v lack %s", r.Method, r.Path, r.User, r.Groups, g)
				}
			}
			if slices.Contains(r.Groups, "evil") || r.Header.Get("X-Remote-Extra-Scopes") != "" {
				t.Errorf("%s %s: a client's identity headers got through: %v", r.Method, r.Path, r.Header)
			}
		default:
			t.Errorf("%s %s: X-Remote-User %q, want one of %v or the aggregator's own", r.Method, r.Path, r.User, admins)
		}
	}
	if probes == 0 {
		t.Errorf("no availability check (GET /apis/%s as system:kube-aggregator) reached the backend", extensionapiserver.GroupVersion)
	}
	if asAdmin == 0 {
		t.Errorf("no request as one of %v reached the backend", admins)
	}
	t.Logf("backend received %d requests, all with the front-proxy certificate %v; %d availability checks, %d as an admin",
		len(reqs), certNames(reqs[0].PeerCertificates), probes, asAdmin)
}

func certNames(certs []*x509.Certificate) []string {
	var out []string
	for _, c := range certs {
		out = append(out, c.Subject.CommonName)
	}
	return out
}

func certCommonName(t *testing.T, certPEM []byte) string {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("admin client certificate: no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("admin client certificate: %v", err)
	}
	return cert.Subject.CommonName
}

// assertTable checks kubectl's table output has the header and exactly
// the rows given (each row's leading columns).
func assertTable(t *testing.T, out string, header []string, rows [][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 || !slices.Equal(strings.Fields(lines[0]), header) {
		t.Errorf("header %q, want %v; output:\n%s", lines[0], header, out)
		return
	}
	if len(lines)-1 != len(rows) {
		t.Errorf("%d rows, want %d; output:\n%s", len(lines)-1, len(rows), out)
		return
	}
	for i, want := range rows {
		if got := strings.Fields(lines[i+1]); len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
			t.Errorf("row %d is %q, want it to start with %v", i, lines[i+1], want)
		}
	}
}

// assertRow checks some line of out starts with the fields want.
func assertRow(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if got := strings.Fields(line); len(got) >= len(want) && slices.Equal(got[:len(want)], want) {
			return
		}
	}
	t.Errorf("%s: no row %v in:\n%s", what, want, out)
}

// pollUntil calls f every aggPoll until it returns nil, and returns its
// last error after timeout.
func pollUntil(ctx context.Context, timeout time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(aggPoll):
		}
	}
}

// kubectlRunner runs the real kubectl against the test server.
type kubectlRunner struct {
	t                         *testing.T
	bin, kubeconfig, cacheDir string
}

func (k *kubectlRunner) run(args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(k.t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--cache-dir", k.cacheDir}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+k.kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// ok runs kubectl and fails the test unless it succeeds.
func (k *kubectlRunner) ok(args ...string) string {
	k.t.Helper()
	stdout, stderr, err := k.run(args...)
	if err != nil {
		k.t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

// fail runs kubectl and fails the test unless it exits non-zero.
func (k *kubectlRunner) fail(args ...string) (string, string) {
	k.t.Helper()
	stdout, stderr, err := k.run(args...)
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		k.t.Fatalf("kubectl %s: %v, want a non-zero exit\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout, stderr
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
