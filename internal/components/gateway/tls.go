package gateway

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeboot/kubeboot/internal/components/gateway/dataplane"
)

// caKey is the key of a ConfigMap that holds CA certificates, PEM.
const caKey = "ca.crt"

// wellKnownSystem is the WellKnownCACertificates value for the node's
// system roots.
const wellKnownSystem gatewayv1.WellKnownCACertificatesType = "System"

// policyTarget is a Service port a BackendTLSPolicy targets: its port's
// name, or "" for every port.
type policyTarget struct {
	service types.NamespacedName
	section string
}

// backendPolicy is a BackendTLSPolicy as the model judges it.
type backendPolicy struct {
	policy *gatewayv1.BackendTLSPolicy
	// conditions are its Accepted and ResolvedRefs, for every Gateway.
	conditions []metav1.Condition
	// tls is how its targets are reached; nil when the policy is not
	// valid, whose targets' requests then fail (the Gateway API says so).
	tls *dataplane.BackendTLS
	// ancestors are the Gateways whose routes reach its targets.
	ancestors map[types.NamespacedName]bool
}

// backendPolicies are the cluster's BackendTLSPolicies, by what they
// target.
type backendPolicies struct {
	all      []*backendPolicy
	byTarget map[policyTarget]*backendPolicy
	// byService are the policies that name each Service, the ones
	// conflicted too: each says so to the Gateways that reach it.
	byService map[types.NamespacedName][]*backendPolicy
}

// judgePolicies judges s's BackendTLSPolicies: of those that target one
// Service port (or a whole Service) the oldest holds it, the others are
// Conflicted; a policy's CA certificates must each resolve.
func judgePolicies(s *snapshot) *backendPolicies {
	bp := &backendPolicies{byTarget: map[policyTarget]*backendPolicy{}, byService: map[types.NamespacedName][]*backendPolicy{}}
	policies := slices.Clone(s.tlsPolicies)
	slices.SortFunc(policies, olderFirst[*gatewayv1.BackendTLSPolicy])
	for _, p := range policies {
		ps := &backendPolicy{policy: p, ancestors: map[types.NamespacedName]bool{}}
		bp.all = append(bp.all, ps)
		var targets []policyTarget
		conflicted := false
		for _, t := range p.Spec.TargetRefs {
			if t.Group != "" || t.Kind != "Service" {
				continue
			}
			target := policyTarget{types.NamespacedName{Namespace: p.Namespace, Name: string(t.Name)}, string(ptr.Deref(t.SectionName, ""))}
			bp.byService[target.service] = append(bp.byService[target.service], ps)
			if bp.byTarget[target] != nil {
				conflicted = true
			}
			targets = append(targets, target)
		}
		resolved, accepted, tlsConfig := judgePolicy(s, p)
		if conflicted {
			accepted = condition(p.Generation, gatewayv1.PolicyConditionAccepted, false, gatewayv1.PolicyReasonConflicted,
				"An older BackendTLSPolicy targets the same Service and sectionName")
		} else {
			for _, t := range targets {
				bp.byTarget[t] = ps
			}
			ps.tls = tlsConfig
		}
		ps.conditions = []metav1.Condition{accepted, resolved}
	}
	return bp
}

// judgePolicy resolves p's CA certificates: its ResolvedRefs and Accepted
// conditions, and how its targets are reached if it is valid. A policy
// one of whose references does not resolve is not used at all: its
// targets' requests fail rather than trust less than it says.
func judgePolicy(s *snapshot, p *gatewayv1.BackendTLSPolicy) (resolved, accepted metav1.Condition, bt *dataplane.BackendTLS) {
	gen, v := p.Generation, p.Spec.Validation
	resolved = condition(gen, gatewayv1.BackendTLSPolicyConditionResolvedRefs, true, gatewayv1.BackendTLSPolicyReasonResolvedRefs, "")
	accepted = condition(gen, gatewayv1.PolicyConditionAccepted, true, gatewayv1.PolicyReasonAccepted, "")
	bt = &dataplane.BackendTLS{ServerName: string(v.Hostname)}
	for _, san := range v.SubjectAltNames {
		bt.SubjectAltNames = append(bt.SubjectAltNames, dataplane.SubjectAltName{Hostname: string(san.Hostname), URI: string(san.URI)})
	}
	if len(v.CACertificateRefs) == 0 {
		if ptr.Deref(v.WellKnownCACertificates, "") != wellKnownSystem {
			accepted = condition(gen, gatewayv1.PolicyConditionAccepted, false, gatewayv1.PolicyReasonInvalid,
				fmt.Sprintf("wellKnownCACertificates %q is not supported: System is", ptr.Deref(v.WellKnownCACertificates, "")))
			return resolved, accepted, nil
		}
		return resolved, accepted, bt // the system's roots
	}
	valid := 0
	for i, ref := range v.CACertificateRefs {
		pemBytes, reason, msg := caCertificates(s, string(ref.Group), string(ref.Kind), p.Namespace, string(ref.Name))
		if reason != "" {
			if resolved.Status == metav1.ConditionTrue {
				resolved = condition(gen, gatewayv1.BackendTLSPolicyConditionResolvedRefs, false, gatewayv1.PolicyConditionReason(reason),
					fmt.Sprintf("validation.caCertificateRefs[%d]: %s", i, msg))
			}
			continue
		}
		valid++
		bt.CACerts = append(bt.CACerts, pemBytes...)
	}
	if valid == 0 {
		accepted = condition(gen, gatewayv1.PolicyConditionAccepted, false, gatewayv1.BackendTLSPolicyReasonNoValidCACertificate,
			"No CA certificate reference resolves")
	}
	if resolved.Status != metav1.ConditionTrue {
		return resolved, accepted, nil
	}
	return resolved, accepted, bt
}

// The reasons a CA certificate reference does not resolve, the same for
// a BackendTLSPolicy's and a listener's.
const (
	reasonInvalidCACertificateRef = "InvalidCACertificateRef"
	reasonInvalidKind             = "InvalidKind"
)

// caCertificates are the CA certificates of the ConfigMap a reference
// names, PEM, or the reason (InvalidKind, InvalidCACertificateRef) and
// message why there are none.
func caCertificates(s *snapshot, group, kind, namespace, name string) ([]byte, string, string) {
	if group != "" || kind != "ConfigMap" {
		return nil, reasonInvalidKind, fmt.Sprintf("a %s.%s holds no CA certificates: ConfigMaps do, in key %s", kind, group, caKey)
	}
	cm := s.configMaps[types.NamespacedName{Namespace: namespace, Name: name}]
	if cm == nil {
		return nil, reasonInvalidCACertificateRef, fmt.Sprintf("ConfigMap %s/%s does not exist", namespace, name)
	}
	pemBytes := []byte(cm.Data[caKey])
	if !holdsCertificate(pemBytes) {
		return nil, reasonInvalidCACertificateRef, fmt.Sprintf("ConfigMap %s/%s holds no PEM certificate in key %s", namespace, name, caKey)
	}
	return pemBytes, "", ""
}

// holdsCertificate reports whether data's PEM blocks are certificates,
// one at least, that parse.
func holdsCertificate(data []byte) bool {
	n := 0
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return n > 0
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return false
		}
		n++
	}
}

// of is the policy that says how a Service's port named port is reached:
// the one naming the port, else the one naming the whole Service.
func (bp *backendPolicies) of(svc types.NamespacedName, port string) *backendPolicy {
	if p := bp.byTarget[policyTarget{svc, port}]; p != nil && port != "" {
		return p
	}
	return bp.byTarget[policyTarget{svc, ""}]
}

// reached records that gateway's routes reach the Services of backends:
// each policy that names one reports to it.
func (bp *backendPolicies) reached(gateway types.NamespacedName, backends []resolvedRule) {
	for _, rule := range backends {
		for _, b := range rule.backends {
			for _, ps := range bp.byService[types.NamespacedName{Namespace: b.Namespace, Name: b.Service}] {
				ps.ancestors[gateway] = true
			}
		}
	}
}

// status is what p's status says to kubeboot's Gateways.
func (p *backendPolicy) status() []gatewayv1.PolicyAncestorStatus {
	var out []gatewayv1.PolicyAncestorStatus
	for _, gw := range sortedNames(p.ancestors) {
		out = append(out, gatewayv1.PolicyAncestorStatus{
			AncestorRef: gatewayv1.ParentReference{Group: ptr.To(groupGateway), Kind: ptr.To(gatewayv1.Kind("Gateway")),
				Namespace: ptr.To(gatewayv1.Namespace(gw.Namespace)), Name: gatewayv1.ObjectName(gw.Name)},
			ControllerName: ControllerName,
			Conditions:     p.conditions,
		})
	}
	return out
}

func sortedNames(set map[types.NamespacedName]bool) []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(set))
	for nn := range set {
		out = append(out, nn)
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}

// withClientCertificate is backends with cert presented to those reached
// over TLS: a Gateway's tls.backend.clientCertificateRef.
func withClientCertificate(backends []dataplane.Backend, cert *dataplane.Certificate) []dataplane.Backend {
	if cert == nil || !slices.ContainsFunc(backends, func(b dataplane.Backend) bool { return b.TLS != nil }) {
		return backends
	}
	out := slices.Clone(backends)
	for i := range out {
		if out[i].TLS != nil {
			t := *out[i].TLS
			t.ClientCertificate = cert
			out[i].TLS = &t
		}
	}
	return out
}

// gatewayClientCertificate is the certificate g presents to the backends
// it reaches over TLS (tls.backend.clientCertificateRef), or the reason
// and message it has none; none without the field.
func gatewayClientCertificate(s *snapshot, g *gatewayv1.Gateway) (*dataplane.Certificate, gatewayv1.GatewayConditionReason, string) {
	if g.Spec.TLS == nil || g.Spec.TLS.Backend == nil || g.Spec.TLS.Backend.ClientCertificateRef == nil {
		return nil, "", ""
	}
	ref := g.Spec.TLS.Backend.ClientCertificateRef
	cert, reason, msg := secretCertificate(s, "Gateway", g.Namespace, "tls.backend.clientCertificateRef", *ref)
	switch reason {
	case "":
		return cert, "", ""
	case gatewayv1.ListenerReasonRefNotPermitted:
		return nil, gatewayv1.GatewayReasonRefNotPermitted, msg
	}
	return nil, gatewayv1.GatewayReasonInvalidClientCertificateRef, msg
}

// secretCertificate is the certificate and key of the TLS Secret ref of
// the field of an object of fromKind in fromNamespace names, or the
// reason (InvalidCertificateRef, RefNotPermitted) and message it does
// not resolve.
func secretCertificate(s *snapshot, fromKind, fromNamespace, field string, ref gatewayv1.SecretObjectReference) (*dataplane.Certificate, gatewayv1.ListenerConditionReason, string) {
	if ptr.Deref(ref.Group, "") != "" || ptr.Deref(ref.Kind, "Secret") != "Secret" {
		return nil, gatewayv1.ListenerReasonInvalidCertificateRef, fmt.Sprintf("%s is a %s.%s: only Secrets are supported",
			field, ptr.Deref(ref.Kind, "Secret"), ptr.Deref(ref.Group, ""))
	}
	ns := string(ptr.Deref(ref.Namespace, gatewayv1.Namespace(fromNamespace)))
	if ns != fromNamespace && !granted(s, fromKind, fromNamespace, "", "Secret", ns, string(ref.Name)) {
		return nil, gatewayv1.ListenerReasonRefNotPermitted, fmt.Sprintf("%s: no ReferenceGrant in %s lets %ss of %s use Secret %s", field, ns, fromKind, fromNamespace, ref.Name)
	}
	secret := s.secrets[types.NamespacedName{Namespace: ns, Name: string(ref.Name)}]
	if secret == nil {
		return nil, gatewayv1.ListenerReasonInvalidCertificateRef, fmt.Sprintf("%s: Secret %s/%s does not exist or is not of type %s", field, ns, ref.Name, corev1.SecretTypeTLS)
	}
	cert := &dataplane.Certificate{Cert: secret.Data[corev1.TLSCertKey], Key: secret.Data[corev1.TLSPrivateKeyKey]}
	if _, err := tls.X509KeyPair(cert.Cert, cert.Key); err != nil {
		return nil, gatewayv1.ListenerReasonInvalidCertificateRef, fmt.Sprintf("%s: Secret %s/%s holds no certificate and key: %v", field, ns, ref.Name, err)
	}
	return cert, "", ""
}

// frontendValidation is how an HTTPS listener of g on port checks its
// clients' certificates (g's tls.frontend, its port's or the default),
// nil if it does not, or the reason and message its references do not
// resolve (all of them: noneValid).
func frontendValidation(s *snapshot, g *gatewayv1.Gateway, port gatewayv1.PortNumber) (v *dataplane.ClientValidation, reason gatewayv1.ListenerConditionReason, msg string, noneValid bool) {
	if g.Spec.TLS == nil || g.Spec.TLS.Frontend == nil {
		return nil, "", "", false
	}
	f := g.Spec.TLS.Frontend
	spec, field := f.Default.Validation, "tls.frontend.default.validation"
	for i, pp := range f.PerPort {
		if pp.Port == port {
			spec, field = pp.TLS.Validation, fmt.Sprintf("tls.frontend.perPort[%d].tls.validation", i)
		}
	}
	if spec == nil {
		return nil, "", "", false
	}
	v = &dataplane.ClientValidation{Optional: spec.Mode == gatewayv1.AllowInsecureFallback}
	valid := 0
	for i, ref := range spec.CACertificateRefs {
		ns := string(ptr.Deref(ref.Namespace, gatewayv1.Namespace(g.Namespace)))
		var pemBytes []byte
		var why string
		var r gatewayv1.ListenerConditionReason
		if ns != g.Namespace && !granted(s, "Gateway", g.Namespace, string(ref.Group), string(ref.Kind), ns, string(ref.Name)) {
			r, why = gatewayv1.ListenerReasonRefNotPermitted, fmt.Sprintf("no ReferenceGrant in %s lets Gateways of %s use %s %s", ns, g.Namespace, ref.Kind, ref.Name)
		} else {
			var caReason string
			pemBytes, caReason, why = caCertificates(s, string(ref.Group), string(ref.Kind), ns, string(ref.Name))
			switch caReason {
			case reasonInvalidKind:
				r = gatewayv1.ListenerReasonInvalidCACertificateKind
			case reasonInvalidCACertificateRef:
				r = gatewayv1.ListenerReasonInvalidCACertificateRef
			}
		}
		if r != "" {
			if reason == "" {
				reason, msg = r, fmt.Sprintf("%s.caCertificateRefs[%d]: %s", field, i, why)
			}
			continue
		}
		valid++
		v.CACerts = append(v.CACerts, pemBytes...)
	}
	return v, reason, msg, valid == 0
}

// mirrorsWithClientCertificate is withClientCertificate of mirrors'
// backends.
func mirrorsWithClientCertificate(mirrors []dataplane.Mirror, cert *dataplane.Certificate) []dataplane.Mirror {
	if cert == nil || !slices.ContainsFunc(mirrors, func(m dataplane.Mirror) bool { return m.Backend.TLS != nil }) {
		return mirrors
	}
	out := slices.Clone(mirrors)
	for i := range out {
		out[i].Backend = withClientCertificate([]dataplane.Backend{out[i].Backend}, cert)[0]
	}
	return out
}
