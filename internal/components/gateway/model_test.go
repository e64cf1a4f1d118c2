package gateway

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeboot/kubeboot/internal/components/gateway/dataplane"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// selfSigned is a certificate and key for host, PEM.
func selfSigned(t testing.TB, host string) (certPEM, keyPEM []byte) {
	t.Helper()
	kp, err := pki.NewSelfSigned(pki.ServingSpec{CommonName: host, DNSNames: []string{host}})
	if err != nil {
		t.Fatal(err)
	}
	return kp.CertPEM, kp.KeyPEM
}

func meta0(ns, name string, age int) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1, CreationTimestamp: metav1.Unix(int64(1000+age), 0)}
}

func kubebootClass() *gatewayv1.GatewayClass {
	return &gatewayv1.GatewayClass{ObjectMeta: meta0("", "kubeboot", 0), Spec: gatewayv1.GatewayClassSpec{ControllerName: ControllerName}}
}

func httpListener(name string, port int32, from gatewayv1.FromNamespaces, hostname string) gatewayv1.Listener {
	l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: gatewayv1.PortNumber(port), Protocol: gatewayv1.HTTPProtocolType,
		AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr.To(from)}}}
	if hostname != "" {
		l.Hostname = ptr.To(gatewayv1.Hostname(hostname))
	}
	return l
}

func gw(ns, name string, age int, listeners ...gatewayv1.Listener) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{ObjectMeta: meta0(ns, name, age), Spec: gatewayv1.GatewaySpec{GatewayClassName: "kubeboot", Listeners: listeners}}
}

func httpRoute(ns, name string, age int, parent gatewayv1.ParentReference, hostnames []string, rules ...gatewayv1.HTTPRouteRule) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{ObjectMeta: meta0(ns, name, age)}
	r.Spec.ParentRefs = []gatewayv1.ParentReference{parent}
	for _, h := range hostnames {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(h))
	}
	r.Spec.Rules = rules
	return r
}

// routeToAppWeb is a route in namespace infra whose backend is the Service app/web.
func routeToAppWeb() *gatewayv1.HTTPRoute {
	rule := ruleTo("web", 8080)
	rule.BackendRefs[0].Namespace = ptr.To(gatewayv1.Namespace("app"))
	return httpRoute("infra", "r", 0, parent("infra", "g"), nil, rule)
}

func parent(ns, name string) gatewayv1.ParentReference {
	return gatewayv1.ParentReference{Namespace: ptr.To(gatewayv1.Namespace(ns)), Name: gatewayv1.ObjectName(name)}
}

func ruleTo(service string, port int32, matches ...gatewayv1.HTTPRouteMatch) gatewayv1.HTTPRouteRule {
	return gatewayv1.HTTPRouteRule{Matches: matches, BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
		BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(service), Port: ptr.To(gatewayv1.PortNumber(port))}}}}}
}

func pathPrefix(p string) gatewayv1.HTTPRouteMatch {
	return gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To(p)}}
}

func service(ns, name string, ports ...int32) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: meta0(ns, name, 0)}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "http", Port: p})
	}
	return svc
}

// baseSnapshot is a cluster with one serving node, kubeboot's class, and
// Service web in ns app.
func baseSnapshot() *snapshot {
	return &snapshot{
		classes:    []*gatewayv1.GatewayClass{kubebootClass()},
		namespaces: map[string]*corev1.Namespace{"app": {ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{"team": "a"}}}, "infra": {ObjectMeta: metav1.ObjectMeta{Name: "infra"}}},
		services:   map[types.NamespacedName]*corev1.Service{{Namespace: "app", Name: "web"}: service("app", "web", 8080)},
		secrets:    map[types.NamespacedName]*corev1.Secret{},
		addresses:  []string{"198.51.100.1"},
		heldPorts:  map[int32]string{},
	}
}

func cond(conds []metav1.Condition, t string) *metav1.Condition {
	return meta.FindStatusCondition(conds, t)
}

// wantCond checks conds has t with status and reason.
func wantCond(t *testing.T, what string, conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := cond(conds, typ)
	if c == nil || c.Status != status || c.Reason != reason {
		t.Errorf("%s condition %s = %+v, want %s/%s", what, typ, c, status, reason)
	}
}

func TestRouteAttachment(t *testing.T) {
	for _, tc := range []struct {
		name       string
		gateway    *gatewayv1.Gateway
		route      *gatewayv1.HTTPRoute
		edit       func(*snapshot)
		accepted   metav1.ConditionStatus
		reason     gatewayv1.RouteConditionReason
		resolved   gatewayv1.RouteConditionReason
		attached   int32
		wantHosts  []string // the hosts served: listeners' hostnames, and the routes' hostnames within
		wantStatus int      // 0: the backend; 500: an invalid one
	}{
		{name: "same namespace", gateway: gw("app", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromSame, "")),
			route: httpRoute("app", "r", 0, parent("app", "g"), nil, ruleTo("web", 8080)), accepted: "True", reason: "Accepted",
			resolved: "ResolvedRefs", attached: 1, wantHosts: []string{""}},
		{name: "another namespace, listener takes its own only", gateway: gw("infra", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromSame, "")),
			route: httpRoute("app", "r", 0, parent("infra", "g"), nil, ruleTo("web", 8080)), accepted: "False", reason: "NotAllowedByListeners",
			resolved: "ResolvedRefs"},
		{name: "another namespace, listener takes all", gateway: gw("infra", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromAll, "")),
			route: httpRoute("app", "r", 0, parent("infra", "g"), nil, ruleTo("web", 8080)), accepted: "True", reason: "Accepted",
			resolved: "ResolvedRefs", attached: 1, wantHosts: []string{""}},
		{name: "namespace selected by label", gateway: func() *gatewayv1.Gateway {
			l := httpListener("http", 80, gatewayv1.NamespacesFromSelector, "")
			l.AllowedRoutes.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
			return gw("infra", "g", 0, l)
		}(), route: httpRoute("app", "r", 0, parent("infra", "g"), nil, ruleTo("web", 8080)), accepted: "True", reason: "Accepted",
			resolved: "ResolvedRefs", attached: 1, wantHosts: []string{""}},
		{name: "sectionName no listener has", gateway: gw("app", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromSame, "")),
			route: func() *gatewayv1.HTTPRoute {
				p := parent("app", "g")
				p.SectionName = ptr.To(gatewayv1.SectionName("other"))
				return httpRoute("app", "r", 0, p, nil, ruleTo("web", 8080))
			}(), accepted: "False", reason: "NoMatchingParent", resolved: "ResolvedRefs"},
		{name: "hostnames intersect: the route's within the listener's wildcard", gateway: gw("app", "g", 0,
			httpListener("http", 80, gatewayv1.NamespacesFromSame, "*.example.com")),
			route:    httpRoute("app", "r", 0, parent("app", "g"), []string{"foo.example.com", "other.org", "example.com"}, ruleTo("web", 8080)),
			accepted: "True", reason: "Accepted", resolved: "ResolvedRefs", attached: 1, wantHosts: []string{"*.example.com:foo.example.com"}},
		{name: "hostnames intersect: the listener's within the route's wildcard", gateway: gw("app", "g", 0,
			httpListener("http", 80, gatewayv1.NamespacesFromSame, "very.specific.com")),
			route:    httpRoute("app", "r", 0, parent("app", "g"), []string{"*.specific.com"}, ruleTo("web", 8080)),
			accepted: "True", reason: "Accepted", resolved: "ResolvedRefs", attached: 1, wantHosts: []string{"very.specific.com:very.specific.com"}},
		{name: "no hostname intersects", gateway: gw("app", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromSame, "*.example.com")),
			route:    httpRoute("app", "r", 0, parent("app", "g"), []string{"example.com", "other.org"}, ruleTo("web", 8080)),
			accepted: "False", reason: "NoMatchingListenerHostname", resolved: "ResolvedRefs"},
		{name: "a missing Service", gateway: gw("app", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromSame, "")),
			route: httpRoute("app", "r", 0, parent("app", "g"), nil, ruleTo("missing", 8080)), accepted: "True", reason: "Accepted",
			resolved: "BackendNotFound", attached: 1, wantHosts: []string{""}, wantStatus: 500},
		{name: "a Service's port it does not have", gateway: gw("app", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromSame, "")),
			route: httpRoute("app", "r", 0, parent("app", "g"), nil, ruleTo("web", 9999)), accepted: "True", reason: "Accepted",
			resolved: "BackendNotFound", attached: 1, wantHosts: []string{""}, wantStatus: 500},
		{name: "another kind of backend", gateway: gw("app", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromSame, "")),
			route: func() *gatewayv1.HTTPRoute {
				rule := ruleTo("web", 8080)
				rule.BackendRefs[0].Kind = ptr.To(gatewayv1.Kind("UnknownKind"))
				return httpRoute("app", "r", 0, parent("app", "g"), nil, rule)
			}(), accepted: "True", reason: "Accepted", resolved: "InvalidKind", attached: 1, wantHosts: []string{""}, wantStatus: 500},
		{name: "another namespace's Service without a grant", gateway: gw("infra", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromAll, "")),
			route: routeToAppWeb(), accepted: "True", reason: "Accepted", resolved: "RefNotPermitted", attached: 1, wantHosts: []string{""}, wantStatus: 500},
		{name: "another namespace's Service with a grant", gateway: gw("infra", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromAll, "")),
			route: routeToAppWeb(),
			edit: func(s *snapshot) {
				s.grants = append(s.grants, &gatewayv1.ReferenceGrant{ObjectMeta: meta0("app", "grant", 0), Spec: gatewayv1.ReferenceGrantSpec{
					From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "infra"}},
					To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}}}})
			}, accepted: "True", reason: "Accepted", resolved: "ResolvedRefs", attached: 1, wantHosts: []string{""}},
		{name: "a listener whose certificate is missing takes the route, and does not serve it", gateway: gw("app", "g", 0,
			gatewayv1.Listener{Name: "tls", Port: 443, Protocol: gatewayv1.HTTPSProtocolType,
				TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "does-not-exist"}}}}),
			route: httpRoute("app", "r", 0, parent("app", "g"), nil, ruleTo("web", 8080)), accepted: "True", reason: "Accepted",
			resolved: "ResolvedRefs", attached: 1},
		{name: "an unsupported filter", gateway: gw("app", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromSame, "")),
			route: func() *gatewayv1.HTTPRoute {
				rule := ruleTo("web", 8080)
				rule.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterExtensionRef}}
				return httpRoute("app", "r", 0, parent("app", "g"), nil, rule)
			}(), accepted: "False", reason: "UnsupportedValue", resolved: "ResolvedRefs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSnapshot()
			s.gateways = []*gatewayv1.Gateway{tc.gateway}
			s.routes = []*gatewayv1.HTTPRoute{tc.route}
			if tc.edit != nil {
				tc.edit(s)
			}
			m := build(s)
			parents := m.routes[routeKey{kindHTTPRoute, nameOf(tc.route)}]
			if len(parents) != 1 {
				t.Fatalf("route status parents: %+v, want 1", parents)
			}
			wantCond(t, "route", parents[0].Conditions, "Accepted", tc.accepted, string(tc.reason))
			wantCond(t, "route", parents[0].Conditions, "ResolvedRefs", map[bool]metav1.ConditionStatus{true: "True", false: "False"}[tc.resolved == "ResolvedRefs"], string(tc.resolved))
			if parents[0].ControllerName != ControllerName {
				t.Errorf("controllerName %q", parents[0].ControllerName)
			}
			gst := m.gateways[types.NamespacedName{Namespace: tc.gateway.Namespace, Name: tc.gateway.Name}]
			if got := gst.Listeners[0].AttachedRoutes; got != tc.attached {
				t.Errorf("attachedRoutes %d, want %d", got, tc.attached)
			}
			cfg := m.config(1)
			var hosts []string
			var routes []dataplane.Route
			for _, p := range cfg.Ports {
				for _, h := range p.Hosts {
					for _, r := range h.Routes {
						name := h.Hostname
						if len(r.Hostnames) > 0 {
							name += ":" + strings.Join(r.Hostnames, ",")
						}
						hosts = append(hosts, name)
						routes = append(routes, r)
					}
				}
			}
			if len(hosts) != len(tc.wantHosts) || len(hosts) > 0 && hosts[0] != tc.wantHosts[0] {
				t.Errorf("hosts served %q, want %q", hosts, tc.wantHosts)
			}
			if len(routes) > 0 {
				invalid := routes[0].Backends[0].Invalid
				if invalid != (tc.wantStatus == 500) {
					t.Errorf("backend invalid = %v, want %v", invalid, tc.wantStatus == 500)
				}
			}
		})
	}
}

func TestListeners(t *testing.T) {
	cert, key := selfSigned(t, "example.org")
	https := func(name string, secret string) gatewayv1.Listener {
		return gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: 443, Protocol: gatewayv1.HTTPSProtocolType,
			TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: gatewayv1.ObjectName(secret)}}}}
	}
	for _, tc := range []struct {
		name      string
		gateways  []*gatewayv1.Gateway
		edit      func(*snapshot)
		gateway   int // the Gateway whose first listener is checked
		condType  string
		status    metav1.ConditionStatus
		reason    string
		gwReason  string // its Gateway's Accepted reason
		programed metav1.ConditionStatus
	}{
		{name: "HTTP", gateways: []*gatewayv1.Gateway{gw("app", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromSame, ""))},
			condType: "Accepted", status: "True", reason: "Accepted", gwReason: "Accepted", programed: "True"},
		{name: "an unsupported protocol", gateways: []*gatewayv1.Gateway{gw("app", "g", 0, gatewayv1.Listener{Name: "udp", Port: 53, Protocol: gatewayv1.UDPProtocolType})},
			condType: "Accepted", status: "False", reason: "UnsupportedProtocol", gwReason: "ListenersNotValid", programed: "False"},
		{name: "HTTPS with its certificate", gateways: []*gatewayv1.Gateway{gw("app", "g", 0, https("https", "cert"))},
			edit: func(s *snapshot) {
				s.secrets[types.NamespacedName{Namespace: "app", Name: "cert"}] = &corev1.Secret{Data: map[string][]byte{"tls.crt": cert, "tls.key": key}}
			}, condType: "ResolvedRefs", status: "True", reason: "ResolvedRefs", gwReason: "Accepted", programed: "True"},
		{name: "HTTPS with a missing Secret", gateways: []*gatewayv1.Gateway{gw("app", "g", 0, https("https", "missing"))},
			condType: "ResolvedRefs", status: "False", reason: "InvalidCertificateRef", gwReason: "Accepted", programed: "False"},
		{name: "HTTPS with a malformed Secret", gateways: []*gatewayv1.Gateway{gw("app", "g", 0, https("https", "bad"))},
			edit: func(s *snapshot) {
				s.secrets[types.NamespacedName{Namespace: "app", Name: "bad"}] = &corev1.Secret{Data: map[string][]byte{"tls.crt": []byte("x"), "tls.key": key}}
			}, condType: "ResolvedRefs", status: "False", reason: "InvalidCertificateRef", gwReason: "Accepted", programed: "False"},
		{name: "a port a LoadBalancer Service holds", gateways: []*gatewayv1.Gateway{gw("app", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromSame, ""))},
			edit: func(s *snapshot) { s.heldPorts[80] = "app/lb" }, condType: "Accepted", status: "False", reason: "PortUnavailable",
			gwReason: "ListenersNotValid", programed: "False"},
		{name: "a port an older Gateway serves with the other protocol", gateways: []*gatewayv1.Gateway{
			gw("app", "old", 0, httpListener("http", 443, gatewayv1.NamespacesFromSame, "")), gw("app", "new", 1, https("https", "cert"))},
			edit: func(s *snapshot) {
				s.secrets[types.NamespacedName{Namespace: "app", Name: "cert"}] = &corev1.Secret{Data: map[string][]byte{"tls.crt": cert, "tls.key": key}}
			}, gateway: 1, condType: "Accepted", status: "False", reason: "PortUnavailable", gwReason: "ListenersNotValid", programed: "False"},
		{name: "Gateways share a port of one protocol", gateways: []*gatewayv1.Gateway{
			gw("app", "one", 0, httpListener("http", 80, gatewayv1.NamespacesFromSame, "")), gw("app", "two", 1, httpListener("http", 80, gatewayv1.NamespacesFromSame, ""))},
			gateway: 1, condType: "Accepted", status: "True", reason: "Accepted", gwReason: "Accepted", programed: "True"},
		{name: "no node serves", gateways: []*gatewayv1.Gateway{gw("app", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromSame, ""))},
			edit: func(s *snapshot) { s.addresses = nil }, condType: "Accepted", status: "True", reason: "Accepted", gwReason: "Accepted", programed: "False"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSnapshot()
			s.gateways = tc.gateways
			if tc.edit != nil {
				tc.edit(s)
			}
			m := build(s)
			everyReason(t, m)
			g := tc.gateways[tc.gateway]
			st := m.gateways[types.NamespacedName{Namespace: g.Namespace, Name: g.Name}]
			wantCond(t, "listener", st.Listeners[0].Conditions, tc.condType, tc.status, tc.reason)
			// One listener each: the Gateway is accepted when it is.
			wantCond(t, "gateway", st.Conditions, "Accepted", map[bool]metav1.ConditionStatus{true: "True", false: "False"}[tc.gwReason == "Accepted"], tc.gwReason)
			if c := cond(st.Conditions, "Programmed"); c == nil || c.Status != tc.programed {
				t.Errorf("gateway Programmed %+v, want %s", c, tc.programed)
			}
			if tc.programed == "True" && (len(st.Addresses) != 1 || st.Addresses[0].Value != "198.51.100.1") {
				t.Errorf("addresses %+v, want the node's", st.Addresses)
			}
		})
	}
}

// TestPrecedence: a host's routes are ordered as the Gateway API says,
// across routes.
func TestPrecedence(t *testing.T) {
	s := baseSnapshot()
	s.gateways = []*gatewayv1.Gateway{gw("app", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromSame, ""))}
	headers := pathPrefix("/")
	headers.Headers = []gatewayv1.HTTPHeaderMatch{{Name: "version", Value: "two"}}
	exactMatch := gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchExact), Value: ptr.To("/a")}}
	s.routes = []*gatewayv1.HTTPRoute{
		httpRoute("app", "newer", 2, parent("app", "g"), nil, ruleTo("web", 8080, pathPrefix("/"))),
		httpRoute("app", "older", 1, parent("app", "g"), nil, ruleTo("web", 8080, pathPrefix("/"), headers), ruleTo("web", 8080, pathPrefix("/a/b"), exactMatch)),
	}
	cfg := build(s).config(1)
	var got []string
	for _, r := range cfg.Ports[0].Hosts[0].Routes {
		p := r.Match.Path
		got = append(got, string(*p.Type)+" "+*p.Value+" "+r.Name+" headers="+string(rune('0'+len(r.Match.Headers))))
	}
	want := []string{
		"Exact /a HTTPRoute app/older rule 1 headers=0",
		"PathPrefix /a/b HTTPRoute app/older rule 1 headers=0",
		"PathPrefix / HTTPRoute app/older rule 0 headers=1",
		"PathPrefix / HTTPRoute app/older rule 0 headers=0",
		"PathPrefix / HTTPRoute app/newer rule 0 headers=0",
	}
	if len(got) != len(want) {
		t.Fatalf("routes:\n%q\nwant\n%q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("route %d: %q, want %q", i, got[i], want[i])
		}
	}
}

func TestIngress(t *testing.T) {
	cert, key := selfSigned(t, "web.example")
	def, defKey := selfSigned(t, "default")
	s := baseSnapshot()
	s.ingress = &IngressOptions{HTTPPort: 80, HTTPSPort: 443}
	s.defaultCertificate = &dataplane.Certificate{Cert: def, Key: defKey}
	s.secrets[types.NamespacedName{Namespace: "app", Name: "web-tls"}] = &corev1.Secret{Data: map[string][]byte{"tls.crt": cert, "tls.key": key}}
	backend := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 8080}}}
	s.ingresses = []*networkingv1.Ingress{
		{ObjectMeta: meta0("app", "web", 0), Spec: networkingv1.IngressSpec{
			DefaultBackend: &backend,
			TLS:            []networkingv1.IngressTLS{{Hosts: []string{"web.example"}, SecretName: "web-tls"}},
			Rules: []networkingv1.IngressRule{{Host: "web.example", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/api", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: backend}}}}}},
		}},
		{ObjectMeta: meta0("app", "other-class", 0), Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("nginx"), DefaultBackend: &backend}},
	}
	m := build(s)
	if st, ok := m.ingresses[types.NamespacedName{Namespace: "app", Name: "web"}]; !ok || len(st.Ingress) != 1 || st.Ingress[0].IP != "198.51.100.1" {
		t.Errorf("the Ingress's status %+v, want the node's address", st)
	}
	if _, ok := m.ingresses[types.NamespacedName{Namespace: "app", Name: "other-class"}]; ok {
		t.Error("an Ingress of another class got a status")
	}
	cfg := m.config(1)
	if len(cfg.Ports) != 2 || cfg.Ports[0].Port != 80 || cfg.Ports[1].Port != 443 || !cfg.Ports[1].TLS {
		t.Fatalf("ports %+v, want 80 and 443 (TLS)", cfg.Ports)
	}
	for _, p := range cfg.Ports {
		hosts := map[string]dataplane.Host{}
		for _, h := range p.Hosts {
			hosts[h.Hostname] = h
		}
		web := hosts["web.example"]
		if len(web.Routes) != 2 || *web.Routes[0].Match.Path.Value != "/api" || web.Routes[1].Name != "Ingress app/web default backend" {
			t.Errorf("port %d, web.example's routes %+v: want /api, then the default backend", p.Port, web.Routes)
		}
		if len(hosts[""].Routes) != 1 {
			t.Errorf("port %d: any host's routes %+v, want the default backend", p.Port, hosts[""].Routes)
		}
		if p.TLS && (web.Certificate == nil || string(web.Certificate.Cert) != string(cert) || hosts[""].Certificate == nil || string(hosts[""].Certificate.Cert) != string(def)) {
			t.Errorf("port %d: certificates: web.example's its own, any host's the default", p.Port)
		}
	}
}

// TestGRPCRoute: a GRPCRoute attaches to an HTTP listener beside an
// HTTPRoute; its method matches become the paths gRPC requests, ordered
// as the Gateway API orders GRPCRoutes; its backends speak h2c; a
// backend in another namespace needs a ReferenceGrant from GRPCRoutes.
func TestGRPCRoute(t *testing.T) {
	method := func(typ gatewayv1.GRPCMethodMatchType, service, method string) gatewayv1.GRPCRouteMatch {
		m := &gatewayv1.GRPCMethodMatch{Type: ptr.To(typ)}
		if service != "" {
			m.Service = ptr.To(service)
		}
		if method != "" {
			m.Method = ptr.To(method)
		}
		return gatewayv1.GRPCRouteMatch{Method: m}
	}
	withHeader := method(gatewayv1.GRPCMethodMatchExact, "echo.Echo", "")
	withHeader.Headers = []gatewayv1.GRPCHeaderMatch{{Name: "version", Value: "two"}}
	rule := func(service string, matches ...gatewayv1.GRPCRouteMatch) gatewayv1.GRPCRouteRule {
		return gatewayv1.GRPCRouteRule{Matches: matches, BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: gatewayv1.BackendRef{
			BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(service), Port: ptr.To(gatewayv1.PortNumber(8080))}}}}}
	}
	other := rule("grpc")
	other.BackendRefs[0].Namespace = ptr.To(gatewayv1.Namespace("infra"))
	s := baseSnapshot()
	s.services[types.NamespacedName{Namespace: "infra", Name: "grpc"}] = service("infra", "grpc", 8080)
	s.gateways = []*gatewayv1.Gateway{gw("app", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromSame, ""))}
	s.routes = []*gatewayv1.HTTPRoute{httpRoute("app", "web", 0, parent("app", "g"), []string{"web.example"}, ruleTo("web", 8080))}
	s.grpcRoutes = []*gatewayv1.GRPCRoute{
		{ObjectMeta: meta0("app", "echo", 1), Spec: gatewayv1.GRPCRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent("app", "g")}},
			Hostnames:       []gatewayv1.Hostname{"grpc.example"},
			Rules: []gatewayv1.GRPCRouteRule{
				rule("web", method(gatewayv1.GRPCMethodMatchExact, "", "Ping")),
				rule("web", method(gatewayv1.GRPCMethodMatchExact, "echo.Echo", "Ping"), withHeader),
				rule("web", method(gatewayv1.GRPCMethodMatchRegularExpression, `echo\..*`, ""), gatewayv1.GRPCRouteMatch{}),
			}}},
		{ObjectMeta: meta0("app", "denied", 2), Spec: gatewayv1.GRPCRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent("app", "g")}},
			Rules:           []gatewayv1.GRPCRouteRule{other}}},
	}
	m := build(s)
	echo := m.routes[routeKey{kindGRPCRoute, types.NamespacedName{Namespace: "app", Name: "echo"}}]
	if len(echo) != 1 {
		t.Fatalf("GRPCRoute app/echo's parents %+v, want one", echo)
	}
	wantCond(t, "GRPCRoute app/echo", echo[0].Conditions, "Accepted", metav1.ConditionTrue, "Accepted")
	wantCond(t, "GRPCRoute app/echo", echo[0].Conditions, "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")
	denied := m.routes[routeKey{kindGRPCRoute, types.NamespacedName{Namespace: "app", Name: "denied"}}]
	if len(denied) != 1 {
		t.Fatalf("GRPCRoute app/denied's parents %+v, want one", denied)
	}
	wantCond(t, "GRPCRoute app/denied", denied[0].Conditions, "ResolvedRefs", metav1.ConditionFalse, "RefNotPermitted")
	// Without hostnames it would share web.example with the older
	// HTTPRoute.
	wantCond(t, "GRPCRoute app/denied", denied[0].Conditions, "Accepted", metav1.ConditionFalse, "Conflicted")
	if _, ok := m.routes[routeKey{kindHTTPRoute, types.NamespacedName{Namespace: "app", Name: "web"}}]; !ok {
		t.Error("the HTTPRoute beside the GRPCRoutes has no status")
	}
	if l := m.gateways[types.NamespacedName{Namespace: "app", Name: "g"}].Listeners[0]; l.AttachedRoutes != 2 {
		t.Errorf("the listener has %d routes attached, want 2", l.AttachedRoutes)
	}

	var got []string
	for _, h := range build(s).config(1).Ports[0].Hosts {
		for _, r := range h.Routes {
			p := r.Match.Path
			got = append(got, strings.Join(r.Hostnames, ",")+" "+string(*p.Type)+" "+*p.Value+" headers="+string(rune('0'+len(r.Match.Headers)))+" "+r.Backends[0].Protocol)
		}
	}
	want := []string{
		"web.example PathPrefix / headers=0 ",
		// The longest service first, then the longest method, then the
		// most headers.
		"grpc.example Exact /echo.Echo/Ping headers=0 h2c",
		"grpc.example PathPrefix /echo.Echo headers=1 h2c",
		"grpc.example RegularExpression /echo\\..*/[^/]+ headers=0 h2c",
		"grpc.example RegularExpression /[^/]+/Ping headers=0 h2c",
		"grpc.example PathPrefix / headers=0 h2c",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("routes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestTLSPassthrough: a TLS listener of mode Passthrough takes TLSRoutes
// and makes its port a passthrough port; one of mode Terminate is not
// accepted (UnsupportedValue); an HTTP listener on the same port as a
// passthrough one conflicts; a TLSRoute does not attach to an HTTP
// listener nor an HTTPRoute to a TLS one.
func TestTLSPassthrough(t *testing.T) {
	cert, key := selfSigned(t, "t.example.com")
	tlsListener := func(name string, port int32, hostname string, mode gatewayv1.TLSModeType) gatewayv1.Listener {
		l := httpListener(name, port, gatewayv1.NamespacesFromSame, hostname)
		l.Protocol = gatewayv1.TLSProtocolType
		l.TLS = &gatewayv1.ListenerTLSConfig{Mode: ptr.To(mode)}
		return l
	}
	s := baseSnapshot()
	s.services[types.NamespacedName{Namespace: "app", Name: "tls"}] = service("app", "tls", 8443)
	s.secrets[types.NamespacedName{Namespace: "app", Name: "cert"}] = &corev1.Secret{Data: map[string][]byte{"tls.crt": cert, "tls.key": key}}
	terminate := tlsListener("terminate", 8443, "t.example.com", gatewayv1.TLSModeTerminate)
	terminate.TLS.CertificateRefs = []gatewayv1.SecretObjectReference{{Name: "cert"}}
	s.gateways = []*gatewayv1.Gateway{
		gw("app", "g", 0,
			tlsListener("passthrough", 443, "*.example.com", gatewayv1.TLSModePassthrough),
			terminate,
			tlsListener("terminate-without-certificate", 9443, "u.example.com", gatewayv1.TLSModeTerminate),
			httpListener("http", 80, gatewayv1.NamespacesFromSame, "")),
		gw("app", "h", 1, httpListener("http-on-443", 443, gatewayv1.NamespacesFromSame, "")),
	}
	tlsRoute := &gatewayv1.TLSRoute{ObjectMeta: meta0("app", "tls", 0), Spec: gatewayv1.TLSRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent("app", "g")}},
		Hostnames:       []gatewayv1.Hostname{"abc.example.com"},
		Rules: []gatewayv1.TLSRouteRule{{BackendRefs: []gatewayv1.BackendRef{{BackendObjectReference: gatewayv1.BackendObjectReference{
			Name: "tls", Port: ptr.To(gatewayv1.PortNumber(8443))}}}}}}}
	toHTTP := tlsRoute.DeepCopy()
	toHTTP.Name = "to-http"
	toHTTP.Spec.ParentRefs[0].SectionName = ptr.To(gatewayv1.SectionName("http"))
	s.tlsRoutes = []*gatewayv1.TLSRoute{tlsRoute, toHTTP}
	httpToTLS := httpRoute("app", "web", 0, parent("app", "g"), nil, ruleTo("web", 8080))
	httpToTLS.Spec.ParentRefs[0].SectionName = ptr.To(gatewayv1.SectionName("passthrough"))
	s.routes = []*gatewayv1.HTTPRoute{httpToTLS}
	m := build(s)

	listeners := map[gatewayv1.SectionName]gatewayv1.ListenerStatus{}
	for _, g := range []string{"g", "h"} {
		for _, l := range m.gateways[types.NamespacedName{Namespace: "app", Name: g}].Listeners {
			listeners[l.Name] = l
		}
	}
	pass := listeners["passthrough"]
	wantCond(t, "listener passthrough", pass.Conditions, "Programmed", metav1.ConditionTrue, "Programmed")
	if len(pass.SupportedKinds) != 1 || pass.SupportedKinds[0].Kind != kindTLSRoute || pass.AttachedRoutes != 1 {
		t.Errorf("listener passthrough: kinds %+v, %d routes attached; want TLSRoute, 1", pass.SupportedKinds, pass.AttachedRoutes)
	}
	wantCond(t, "listener terminate", listeners["terminate"].Conditions, "Programmed", metav1.ConditionTrue, "Programmed")
	wantCond(t, "listener terminate-without-certificate", listeners["terminate-without-certificate"].Conditions, "ResolvedRefs", metav1.ConditionFalse, "InvalidCertificateRef")
	wantCond(t, "listener http-on-443", listeners["http-on-443"].Conditions, "Accepted", metav1.ConditionFalse, "PortUnavailable")

	wantCond(t, "TLSRoute app/tls", m.routes[routeKey{kindTLSRoute, nameOf(tlsRoute)}][0].Conditions, "Accepted", metav1.ConditionTrue, "Accepted")
	wantCond(t, "TLSRoute app/to-http", m.routes[routeKey{kindTLSRoute, nameOf(toHTTP)}][0].Conditions, "Accepted", metav1.ConditionFalse, "NotAllowedByListeners")
	wantCond(t, "HTTPRoute app/web", m.routes[routeKey{kindHTTPRoute, nameOf(httpToTLS)}][0].Conditions, "Accepted", metav1.ConditionFalse, "NotAllowedByListeners")

	cfg := m.config(1)
	var p443, p8443 *dataplane.Port
	for i := range cfg.Ports {
		switch cfg.Ports[i].Port {
		case 443:
			p443 = &cfg.Ports[i]
		case 8443:
			p8443 = &cfg.Ports[i]
		case 9443:
			t.Error("the Terminate listener without a certificate is served")
		}
	}
	if p8443 == nil || !p8443.Passthrough || len(p8443.Hosts) != 1 || p8443.Hosts[0].Certificate == nil {
		t.Errorf("port 8443: %+v; want a TLS port whose host terminates with its certificate", p8443)
	}
	if p443 == nil || !p443.Passthrough || p443.TLS || len(p443.Hosts) != 1 || p443.Hosts[0].Hostname != "*.example.com" || p443.Hosts[0].Certificate != nil ||
		len(p443.Hosts[0].Routes) != 1 || p443.Hosts[0].Routes[0].Hostnames[0] != "abc.example.com" || p443.Hosts[0].Routes[0].Backends[0].Service != "tls" {
		t.Errorf("port 443: %+v; want passed through, abc.example.com to Service tls", p443)
	}
}

func TestParseAddressRange(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"198.51.100.96/28", "198.51.100.97-198.51.100.110"},
		{"198.51.100.100/32", "198.51.100.100-198.51.100.100"},
		{"198.51.100.100/31", "198.51.100.100-198.51.100.101"},
		{"198.51.100.100-198.51.100.120", "198.51.100.100-198.51.100.120"},
		{" 198.51.100.100 - 198.51.100.100", "198.51.100.100-198.51.100.100"},
		{"2001:db8::/126", "2001:db8::-2001:db8::3"},
		{"198.51.100.120-198.51.100.100", ""},
		{"198.51.100.1-2001:db8::1", ""},
		{"198.51.100.0/33", ""},
		{"nope", ""},
	} {
		r, err := ParseAddressRange(tc.in)
		if got := ""; err == nil {
			got = r.String()
			if got != tc.want {
				t.Errorf("%q: %s, want %s", tc.in, got, tc.want)
			}
		} else if tc.want != "" {
			t.Errorf("%q: %v, want %s", tc.in, err, tc.want)
		}
	}
}

// TestOwnAddresses: with --gateway-addresses each Gateway gets an address
// of the range (keeping the one its status has), held by one serving
// node; two Gateways serve the same port apart, at their own addresses;
// a LoadBalancer Service's port on the nodes' addresses does not hold
// theirs; a Gateway the range has no address left for is not programmed.
func TestOwnAddresses(t *testing.T) {
	pool, err := ParseAddressRange("198.51.100.100-198.51.100.101")
	if err != nil {
		t.Fatal(err)
	}
	s := baseSnapshot()
	s.pool, s.nodes = &pool, []string{"a", "b"}
	s.heldPorts[80] = "app/lb"
	kept := gw("app", "kept", 2, httpListener("http", 80, gatewayv1.NamespacesFromSame, ""))
	kept.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Value: "198.51.100.101"}}
	s.gateways = []*gatewayv1.Gateway{
		gw("app", "first", 0, httpListener("http", 80, gatewayv1.NamespacesFromSame, "")),
		kept,
		gw("app", "none-left", 3, httpListener("http", 80, gatewayv1.NamespacesFromSame, "")),
	}
	rule := func(service string) gatewayv1.HTTPRouteRule { return ruleTo(service, 8080) }
	s.services[types.NamespacedName{Namespace: "app", Name: "other"}] = service("app", "other", 8080)
	s.routes = []*gatewayv1.HTTPRoute{
		httpRoute("app", "to-first", 0, parent("app", "first"), nil, rule("web")),
		httpRoute("app", "to-kept", 0, parent("app", "kept"), nil, rule("other")),
	}
	m := build(s)
	for name, want := range map[string]string{"first": "198.51.100.100", "kept": "198.51.100.101"} {
		st := m.gateways[types.NamespacedName{Namespace: "app", Name: name}]
		wantCond(t, "Gateway "+name, st.Conditions, "Programmed", metav1.ConditionTrue, "Programmed")
		if len(st.Addresses) != 1 || st.Addresses[0].Value != want {
			t.Errorf("Gateway %s: addresses %+v, want %s", name, st.Addresses, want)
		}
	}
	st := m.gateways[types.NamespacedName{Namespace: "app", Name: "none-left"}]
	wantCond(t, "Gateway none-left", st.Conditions, "Programmed", metav1.ConditionFalse, "AddressNotAssigned")

	cfg := m.config(1)
	if cfg.Pool == nil || *cfg.Pool != pool {
		t.Errorf("the Config's range %v, want %v", cfg.Pool, pool)
	}
	if len(cfg.Announce) != 2 || cfg.Announce[0].Address.String() != "198.51.100.100" || cfg.Announce[1].Address.String() != "198.51.100.101" {
		t.Fatalf("announced %+v, want both addresses", cfg.Announce)
	}
	for _, a := range cfg.Announce {
		if a.Node != "a" && a.Node != "b" {
			t.Errorf("%s is held by %q, not a serving node", a.Address, a.Node)
		}
	}
	backends := map[string]string{}
	for _, p := range cfg.Ports {
		if p.Port != 80 || len(p.Hosts) != 1 || len(p.Hosts[0].Routes) != 1 {
			t.Fatalf("port %+v: want port 80 with one route", p)
		}
		backends[p.Address.String()] = p.Hosts[0].Routes[0].Backends[0].Service
	}
	if len(backends) != 2 || backends["198.51.100.100"] != "web" || backends["198.51.100.101"] != "other" {
		t.Errorf("the ports' backends by address %v, want each Gateway's route at its own address", backends)
	}
}

// TestRequestedAddresses: a Gateway's spec.addresses ask for an address
// of the range; one outside it or another's is not usable (Accepted,
// not Programmed), another type is not supported (not Accepted), and
// without a range none is (nothing served).
func TestRequestedAddresses(t *testing.T) {
	pool, err := ParseAddressRange("198.51.100.100-198.51.100.110")
	if err != nil {
		t.Fatal(err)
	}
	asking := func(name string, age int, addrType gatewayv1.AddressType, value string) *gatewayv1.Gateway {
		g := gw("app", name, age, httpListener("http", 8080, gatewayv1.NamespacesFromSame, ""))
		if value != "" {
			g.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Type: ptr.To(addrType), Value: value}}
		}
		return g
	}
	s := baseSnapshot()
	s.pool, s.nodes = &pool, []string{"a"}
	s.gateways = []*gatewayv1.Gateway{
		asking("usable", 0, gatewayv1.IPAddressType, "198.51.100.105"),
		asking("outside", 1, gatewayv1.IPAddressType, "192.0.2.1"),
		asking("hostname", 2, gatewayv1.HostnameAddressType, "gw.example"),
		asking("taken", 3, gatewayv1.IPAddressType, "198.51.100.105"),
		asking("any", 4, "", ""),
		asking("no-value", 5, gatewayv1.IPAddressType, ""),
	}
	m := build(s)
	for _, tc := range []struct {
		name, accepted, programmed, reason, address string
	}{
		{"usable", "True", "True", "Programmed", "198.51.100.105"},
		{"outside", "True", "False", "AddressNotUsable", ""},
		{"hostname", "False", "False", "Invalid", ""},
		{"taken", "True", "False", "AddressNotUsable", ""},
		{"any", "True", "True", "Programmed", "198.51.100.100"},
		{"no-value", "True", "True", "Programmed", "198.51.100.101"},
	} {
		st := m.gateways[types.NamespacedName{Namespace: "app", Name: tc.name}]
		wantCond(t, "Gateway "+tc.name, st.Conditions, "Accepted", metav1.ConditionStatus(tc.accepted), cond(st.Conditions, "Accepted").Reason)
		wantCond(t, "Gateway "+tc.name, st.Conditions, "Programmed", metav1.ConditionStatus(tc.programmed), tc.reason)
		if got := ""; len(st.Addresses) > 0 {
			if got = st.Addresses[0].Value; got != tc.address {
				t.Errorf("Gateway %s: address %s, want %q", tc.name, got, tc.address)
			}
		} else if tc.address != "" {
			t.Errorf("Gateway %s: no address, want %s", tc.name, tc.address)
		}
	}
	wantCond(t, "Gateway hostname", m.gateways[types.NamespacedName{Namespace: "app", Name: "hostname"}].Conditions, "Accepted", metav1.ConditionFalse, "UnsupportedAddress")
	if got := len(m.config(1).Ports); got != 3 {
		t.Errorf("%d ports served, want the three programmed Gateways'", got)
	}

	s.pool = nil
	s.gateways = []*gatewayv1.Gateway{asking("no-range", 0, gatewayv1.IPAddressType, "198.51.100.1")}
	m = build(s)
	wantCond(t, "Gateway no-range", m.gateways[types.NamespacedName{Namespace: "app", Name: "no-range"}].Conditions, "Accepted", metav1.ConditionFalse, "UnsupportedAddress")
	if got := len(m.config(1).Ports); got != 0 {
		t.Errorf("%d ports served for a Gateway not accepted, want none", got)
	}
}

// TestIngressPortHeld: an Ingress port a LoadBalancer Service holds is
// not served, and the Ingresses of kubeboot's class say why (an event);
// the other port still serves them.
func TestIngressPortHeld(t *testing.T) {
	s := baseSnapshot()
	s.ingress = &IngressOptions{HTTPPort: 80, HTTPSPort: 443}
	s.heldPorts[80] = "app/lb"
	backend := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 8080}}}
	s.ingresses = []*networkingv1.Ingress{{ObjectMeta: meta0("app", "web", 0), Spec: networkingv1.IngressSpec{DefaultBackend: &backend}}}
	m := build(s)
	if got := m.ingressUnserved[types.NamespacedName{Namespace: "app", Name: "web"}]; !strings.Contains(got, "port 80 is held by LoadBalancer Service app/lb") {
		t.Errorf("why the Ingress is not served on port 80: %q", got)
	}
	cfg := m.config(1)
	if len(cfg.Ports) != 1 || cfg.Ports[0].Port != 443 {
		t.Errorf("ports %+v, want 443 alone", cfg.Ports)
	}
}
