package gateway

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// tlsPolicy is a BackendTLSPolicy in app for Service web (its port
// section, "" for all) whose CA is ConfigMap cm.
func tlsPolicy(name string, age int, section, cm string) *gatewayv1.BackendTLSPolicy {
	p := &gatewayv1.BackendTLSPolicy{ObjectMeta: meta0("app", name, age)}
	ref := gatewayv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Kind: "Service", Name: "web"}}
	if section != "" {
		ref.SectionName = ptr.To(gatewayv1.SectionName(section))
	}
	p.Spec.TargetRefs = []gatewayv1.LocalPolicyTargetReferenceWithSectionName{ref}
	p.Spec.Validation = gatewayv1.BackendTLSPolicyValidation{Hostname: "web.example",
		CACertificateRefs: []gatewayv1.LocalObjectReference{{Kind: "ConfigMap", Name: gatewayv1.ObjectName(cm)}}}
	return p
}

// TestBackendTLSPolicies: the oldest policy of a Service port holds it,
// the others are Conflicted; a policy whose CA does not resolve says why
// and its Service's requests fail; each reports to the Gateways whose
// routes reach its Service.
func TestBackendTLSPolicies(t *testing.T) {
	ca, _ := selfSigned(t, "ca.example")
	for _, tc := range []struct {
		name     string
		policies []*gatewayv1.BackendTLSPolicy
		edit     func(*snapshot)
		check    string // the policy checked
		accepted string // its Accepted reason (True only for Accepted)
		resolved string // its ResolvedRefs reason
		tls      bool   // the backend is reached over TLS
		invalid  bool   // the backend's requests fail
	}{
		{name: "valid", policies: []*gatewayv1.BackendTLSPolicy{tlsPolicy("p", 0, "", "ca")}, check: "p",
			accepted: "Accepted", resolved: "ResolvedRefs", tls: true},
		{name: "the port's section", policies: []*gatewayv1.BackendTLSPolicy{tlsPolicy("p", 0, "http", "ca")}, check: "p",
			accepted: "Accepted", resolved: "ResolvedRefs", tls: true},
		{name: "another port's section", policies: []*gatewayv1.BackendTLSPolicy{tlsPolicy("p", 0, "grpc", "ca")}, check: "p",
			accepted: "Accepted", resolved: "ResolvedRefs"},
		{name: "a newer policy of the same target", policies: []*gatewayv1.BackendTLSPolicy{tlsPolicy("old", 0, "", "ca"), tlsPolicy("new", 1, "", "missing")},
			check: "new", accepted: "Conflicted", resolved: "InvalidCACertificateRef", tls: true},
		{name: "a missing ConfigMap", policies: []*gatewayv1.BackendTLSPolicy{tlsPolicy("p", 0, "", "missing")}, check: "p",
			accepted: "NoValidCACertificate", resolved: "InvalidCACertificateRef", invalid: true},
		{name: "a ConfigMap without a certificate", policies: []*gatewayv1.BackendTLSPolicy{tlsPolicy("p", 0, "", "empty")}, check: "p",
			accepted: "NoValidCACertificate", resolved: "InvalidCACertificateRef", invalid: true},
		{name: "a Secret as CA", policies: []*gatewayv1.BackendTLSPolicy{func() *gatewayv1.BackendTLSPolicy {
			p := tlsPolicy("p", 0, "", "ca")
			p.Spec.Validation.CACertificateRefs[0].Kind = "Secret"
			return p
		}()}, check: "p", accepted: "NoValidCACertificate", resolved: "InvalidKind", invalid: true},
		{name: "one CA of two does not resolve", policies: []*gatewayv1.BackendTLSPolicy{func() *gatewayv1.BackendTLSPolicy {
			p := tlsPolicy("p", 0, "", "ca")
			p.Spec.Validation.CACertificateRefs = append(p.Spec.Validation.CACertificateRefs, gatewayv1.LocalObjectReference{Kind: "ConfigMap", Name: "missing"})
			return p
		}()}, check: "p", accepted: "Accepted", resolved: "InvalidCACertificateRef", invalid: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSnapshot()
			s.configMaps = map[types.NamespacedName]*corev1.ConfigMap{
				{Namespace: "app", Name: "ca"}:    {Data: map[string]string{"ca.crt": string(ca)}},
				{Namespace: "app", Name: "empty"}: {Data: map[string]string{"ca.crt": "none"}},
			}
			s.gateways = []*gatewayv1.Gateway{gw("app", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromSame, ""))}
			s.routes = []*gatewayv1.HTTPRoute{httpRoute("app", "r", 0, parent("app", "g"), nil, ruleTo("web", 8080))}
			s.tlsPolicies = tc.policies
			m := build(s)
			var checked *backendPolicy
			for _, p := range m.policies.all {
				if p.policy.Name == tc.check {
					checked = p
				}
			}
			st := checked.status()
			if len(st) != 1 || st[0].AncestorRef.Name != "g" {
				t.Fatalf("ancestors %+v, want Gateway g", st)
			}
			acceptedStatus := metav1.ConditionFalse
			if tc.accepted == "Accepted" {
				acceptedStatus = metav1.ConditionTrue
			}
			resolvedStatus := metav1.ConditionFalse
			if tc.resolved == "ResolvedRefs" {
				resolvedStatus = metav1.ConditionTrue
			}
			wantCond(t, "policy", st[0].Conditions, "Accepted", acceptedStatus, tc.accepted)
			wantCond(t, "policy", st[0].Conditions, "ResolvedRefs", resolvedStatus, tc.resolved)
			b := m.config(1).Ports[0].Hosts[0].Routes[0].Backends[0]
			if (b.TLS != nil) != tc.tls || b.Invalid != tc.invalid {
				t.Errorf("backend TLS %+v, invalid %t; want TLS %t, invalid %t", b.TLS, b.Invalid, tc.tls, tc.invalid)
			}
			if b.TLS != nil && (b.TLS.ServerName != "web.example" || string(b.TLS.CACerts) != string(ca)) {
				t.Errorf("backend TLS %+v, want the policy's hostname and CA", b.TLS)
			}
			if wantRoute := cond(m.routes[routeKey{kindHTTPRoute, types.NamespacedName{Namespace: "app", Name: "r"}}][0].Conditions, "ResolvedRefs"); wantRoute.Status != metav1.ConditionTrue {
				t.Errorf("the route's ResolvedRefs %+v: a policy does not change it", wantRoute)
			}
		})
	}
}

// TestGatewayTLS: a Gateway's client certificate for its backends and
// its listeners' validation of their clients, and what their references
// that do not resolve say.
func TestGatewayTLS(t *testing.T) {
	cert, key := selfSigned(t, "example.org")
	ca, _ := selfSigned(t, "ca.example")
	https := gatewayv1.Listener{Name: "https", Port: 443, Protocol: gatewayv1.HTTPSProtocolType,
		TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "cert"}}}}
	validation := func(kind, name, ns string, mode gatewayv1.FrontendValidationModeType) *gatewayv1.GatewayTLSConfig {
		ref := gatewayv1.ObjectReference{Kind: gatewayv1.Kind(kind), Name: gatewayv1.ObjectName(name)}
		if ns != "" {
			ref.Namespace = ptr.To(gatewayv1.Namespace(ns))
		}
		return &gatewayv1.GatewayTLSConfig{Frontend: &gatewayv1.FrontendTLSConfig{Default: gatewayv1.TLSConfig{
			Validation: &gatewayv1.FrontendTLSValidation{CACertificateRefs: []gatewayv1.ObjectReference{ref}, Mode: mode}}}}
	}
	clientCert := func(name string) *gatewayv1.GatewayTLSConfig {
		return &gatewayv1.GatewayTLSConfig{Backend: &gatewayv1.GatewayBackendTLS{ClientCertificateRef: &gatewayv1.SecretObjectReference{Name: gatewayv1.ObjectName(name)}}}
	}
	for _, tc := range []struct {
		name                 string
		tls                  *gatewayv1.GatewayTLSConfig
		gwResolved           string // the Gateway's ResolvedRefs reason
		listenerAccepted     string
		listenerResolved     string
		validated, optional  bool // the host validates its clients, optionally
		insecure, clientCert bool // InsecureFrontendValidationMode; the backends get the certificate
	}{
		{name: "none", gwResolved: "ResolvedRefs", listenerAccepted: "Accepted", listenerResolved: "ResolvedRefs"},
		{name: "client validation", tls: validation("ConfigMap", "ca", "", ""), gwResolved: "ResolvedRefs",
			listenerAccepted: "Accepted", listenerResolved: "ResolvedRefs", validated: true},
		{name: "insecure fallback", tls: validation("ConfigMap", "ca", "", gatewayv1.AllowInsecureFallback), gwResolved: "ResolvedRefs",
			listenerAccepted: "Accepted", listenerResolved: "ResolvedRefs", validated: true, optional: true, insecure: true},
		{name: "a missing CA", tls: validation("ConfigMap", "missing", "", ""), gwResolved: "ListenersNotResolved",
			listenerAccepted: "NoValidCACertificate", listenerResolved: "InvalidCACertificateRef"},
		{name: "a CA of another kind", tls: validation("Service", "web", "", ""), gwResolved: "ListenersNotResolved",
			listenerAccepted: "NoValidCACertificate", listenerResolved: "InvalidCACertificateKind"},
		{name: "a CA of another namespace", tls: validation("ConfigMap", "ca", "infra", ""), gwResolved: "ListenersNotResolved",
			listenerAccepted: "NoValidCACertificate", listenerResolved: "RefNotPermitted"},
		{name: "a client certificate", tls: clientCert("cert"), gwResolved: "ResolvedRefs",
			listenerAccepted: "Accepted", listenerResolved: "ResolvedRefs", clientCert: true},
		{name: "a missing client certificate", tls: clientCert("missing"), gwResolved: "InvalidClientCertificateRef",
			listenerAccepted: "Accepted", listenerResolved: "ResolvedRefs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSnapshot()
			s.secrets[types.NamespacedName{Namespace: "app", Name: "cert"}] = &corev1.Secret{Data: map[string][]byte{"tls.crt": cert, "tls.key": key}}
			s.configMaps = map[types.NamespacedName]*corev1.ConfigMap{
				{Namespace: "app", Name: "ca"}:   {Data: map[string]string{"ca.crt": string(ca)}},
				{Namespace: "infra", Name: "ca"}: {Data: map[string]string{"ca.crt": string(ca)}},
			}
			g := gw("app", "g", 0, https)
			g.Spec.TLS = tc.tls
			s.gateways = []*gatewayv1.Gateway{g}
			s.routes = []*gatewayv1.HTTPRoute{httpRoute("app", "r", 0, parent("app", "g"), nil, ruleTo("web", 8080))}
			s.tlsPolicies = []*gatewayv1.BackendTLSPolicy{tlsPolicy("p", 0, "", "ca")}
			m := build(s)
			everyReason(t, m)
			st := m.gateways[types.NamespacedName{Namespace: "app", Name: "g"}]
			status := func(reason, ok string) metav1.ConditionStatus {
				if reason == ok {
					return metav1.ConditionTrue
				}
				return metav1.ConditionFalse
			}
			wantCond(t, "gateway", st.Conditions, "ResolvedRefs", status(tc.gwResolved, "ResolvedRefs"), tc.gwResolved)
			wantCond(t, "listener", st.Listeners[0].Conditions, "Accepted", status(tc.listenerAccepted, "Accepted"), tc.listenerAccepted)
			wantCond(t, "listener", st.Listeners[0].Conditions, "ResolvedRefs", status(tc.listenerResolved, "ResolvedRefs"), tc.listenerResolved)
			if c := cond(st.Conditions, "InsecureFrontendValidationMode"); (c != nil) != tc.insecure {
				t.Errorf("InsecureFrontendValidationMode %+v, want %t", c, tc.insecure)
			}
			cfg := m.config(1)
			if tc.listenerAccepted != "Accepted" {
				if len(cfg.Ports) != 0 {
					t.Errorf("ports %+v: a listener not accepted is not served", cfg.Ports)
				}
				return
			}
			h := cfg.Ports[0].Hosts[0]
			if v := h.ClientValidation; (v != nil) != tc.validated || v != nil && (v.Optional != tc.optional || string(v.CACerts) != string(ca)) {
				t.Errorf("client validation %+v, want validated %t optional %t", v, tc.validated, tc.optional)
			}
			if b := h.Routes[0].Backends[0]; (b.TLS.ClientCertificate != nil) != tc.clientCert {
				t.Errorf("the backend's client certificate %v, want %t", b.TLS.ClientCertificate != nil, tc.clientCert)
			}
		})
	}
}
