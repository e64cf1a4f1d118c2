package gateway

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeboot/kubeboot/internal/components/gateway/dataplane"
)

// supportedFilters are the route filters the nodes apply (a GRPCRoute's
// are of the same names).
var supportedFilters = []gatewayv1.HTTPRouteFilterType{
	gatewayv1.HTTPRouteFilterRequestHeaderModifier, gatewayv1.HTTPRouteFilterResponseHeaderModifier,
	gatewayv1.HTTPRouteFilterRequestRedirect, gatewayv1.HTTPRouteFilterURLRewrite, gatewayv1.HTTPRouteFilterRequestMirror,
	gatewayv1.HTTPRouteFilterCORS,
}

// routeKey names a route of either kind.
type routeKey struct {
	kind gatewayv1.Kind
	types.NamespacedName
}

// routeSpec is an HTTPRoute or a GRPCRoute as the model attaches it: a
// GRPCRoute's matches made the HTTP requests gRPC sends (grpcMatch), so
// that the nodes match both kinds alike.
type routeSpec struct {
	kind gatewayv1.Kind
	metav1.ObjectMeta
	parentRefs []gatewayv1.ParentReference
	hostnames  []gatewayv1.Hostname
	rules      []ruleSpec
}

type ruleSpec struct {
	matches []gatewayv1.HTTPRouteMatch
	// grpc ranks each match among a GRPCRoute's (nil: an HTTPRoute's).
	grpc        []grpcRank
	filters     []gatewayv1.HTTPRouteFilter
	backendRefs []backendRef
	// timeouts and retry are an HTTPRoute rule's.
	timeouts *gatewayv1.HTTPRouteTimeouts
	retry    *gatewayv1.HTTPRouteRetry
	// session is the rule's session persistence (an HTTPRoute's or a
	// GRPCRoute's; a field of the experimental channel's CRDs).
	session *gatewayv1.SessionPersistence
}

// backendRef is a rule's backendRef and its own filters.
type backendRef struct {
	gatewayv1.BackendRef
	filters []gatewayv1.HTTPRouteFilter
}

// backendFilters are the filters a backendRef may have of its own.
var backendFilters = []gatewayv1.HTTPRouteFilterType{
	gatewayv1.HTTPRouteFilterRequestHeaderModifier, gatewayv1.HTTPRouteFilterResponseHeaderModifier,
}

// grpcRank is what orders a GRPCRoute's match among others: the
// characters of its service, then of its method.
type grpcRank struct{ service, method int }

func (r *routeSpec) key() routeKey {
	return routeKey{r.kind, types.NamespacedName{Namespace: r.Namespace, Name: r.Name}}
}

// fromHTTPRoute is r's routeSpec.
func fromHTTPRoute(r *gatewayv1.HTTPRoute) *routeSpec {
	rs := &routeSpec{kind: kindHTTPRoute, ObjectMeta: r.ObjectMeta, parentRefs: r.Spec.ParentRefs, hostnames: r.Spec.Hostnames}
	for _, rule := range r.Spec.Rules {
		matches := rule.Matches
		if len(matches) == 0 {
			matches = []gatewayv1.HTTPRouteMatch{{}}
		}
		rr := ruleSpec{filters: rule.Filters, timeouts: rule.Timeouts, retry: rule.Retry, session: rule.SessionPersistence}
		for _, m := range matches {
			rr.matches = append(rr.matches, normalize(m))
		}
		for _, b := range rule.BackendRefs {
			rr.backendRefs = append(rr.backendRefs, backendRef{b.BackendRef, b.Filters})
		}
		rs.rules = append(rs.rules, rr)
	}
	return rs
}

// fromGRPCRoute is r's routeSpec: each method match the path gRPC
// requests ("/service/method"), its filters HTTP's of the same type.
func fromGRPCRoute(r *gatewayv1.GRPCRoute) *routeSpec {
	rs := &routeSpec{kind: kindGRPCRoute, ObjectMeta: r.ObjectMeta, parentRefs: r.Spec.ParentRefs, hostnames: r.Spec.Hostnames}
	for _, rule := range r.Spec.Rules {
		matches := rule.Matches
		if len(matches) == 0 {
			matches = []gatewayv1.GRPCRouteMatch{{}}
		}
		rr := ruleSpec{session: rule.SessionPersistence}
		for _, m := range matches {
			hm, rank := grpcMatch(m)
			rr.matches = append(rr.matches, normalize(hm))
			rr.grpc = append(rr.grpc, rank)
		}
		rr.filters = grpcFilters(rule.Filters)
		for _, b := range rule.BackendRefs {
			rr.backendRefs = append(rr.backendRefs, backendRef{b.BackendRef, grpcFilters(b.Filters)})
		}
		rs.rules = append(rs.rules, rr)
	}
	return rs
}

// fromTLSRoute is r's routeSpec: its rules choose by hostname only (a
// match of any request, which a passthrough port does not look at).
func fromTLSRoute(r *gatewayv1.TLSRoute) *routeSpec {
	rs := &routeSpec{kind: kindTLSRoute, ObjectMeta: r.ObjectMeta, parentRefs: r.Spec.ParentRefs, hostnames: r.Spec.Hostnames}
	for _, rule := range r.Spec.Rules {
		rr := ruleSpec{matches: []gatewayv1.HTTPRouteMatch{normalize(gatewayv1.HTTPRouteMatch{})}}
		for _, b := range rule.BackendRefs {
			rr.backendRefs = append(rr.backendRefs, backendRef{BackendRef: b})
		}
		rs.rules = append(rs.rules, rr)
	}
	return rs
}

// grpcFilters are a GRPCRoute's filters as HTTP's of the same type.
func grpcFilters(filters []gatewayv1.GRPCRouteFilter) []gatewayv1.HTTPRouteFilter {
	var out []gatewayv1.HTTPRouteFilter
	for _, f := range filters {
		out = append(out, gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterType(f.Type),
			RequestHeaderModifier: f.RequestHeaderModifier, ResponseHeaderModifier: f.ResponseHeaderModifier,
			RequestMirror: f.RequestMirror, ExtensionRef: f.ExtensionRef})
	}
	return out
}

// grpcMatch is the HTTP match of the requests a GRPCRoute's match
// matches: gRPC calls a method with a POST to "/service/method".
func grpcMatch(m gatewayv1.GRPCRouteMatch) (gatewayv1.HTTPRouteMatch, grpcRank) {
	var hm gatewayv1.HTTPRouteMatch
	var rank grpcRank
	if mm := m.Method; mm != nil {
		service, method := ptr.Deref(mm.Service, ""), ptr.Deref(mm.Method, "")
		rank = grpcRank{len(service), len(method)}
		path := func(t gatewayv1.PathMatchType, v string) *gatewayv1.HTTPPathMatch {
			return &gatewayv1.HTTPPathMatch{Type: ptr.To(t), Value: ptr.To(v)}
		}
		switch {
		case ptr.Deref(mm.Type, gatewayv1.GRPCMethodMatchExact) == gatewayv1.GRPCMethodMatchRegularExpression:
			hm.Path = path(gatewayv1.PathMatchRegularExpression, "/"+cmp.Or(service, "[^/]+")+"/"+cmp.Or(method, "[^/]+"))
		case service != "" && method != "":
			hm.Path = path(gatewayv1.PathMatchExact, "/"+service+"/"+method)
		case service != "":
			hm.Path = path(gatewayv1.PathMatchPathPrefix, "/"+service)
		case method != "":
			hm.Path = path(gatewayv1.PathMatchRegularExpression, "/[^/]+/"+regexp.QuoteMeta(method))
		}
	}
	for _, h := range m.Headers {
		t := gatewayv1.HeaderMatchExact
		if ptr.Deref(h.Type, gatewayv1.GRPCHeaderMatchExact) == gatewayv1.GRPCHeaderMatchRegularExpression {
			t = gatewayv1.HeaderMatchRegularExpression
		}
		hm.Headers = append(hm.Headers, gatewayv1.HTTPHeaderMatch{Type: ptr.To(t), Name: gatewayv1.HTTPHeaderName(h.Name), Value: h.Value})
	}
	return hm, rank
}

// route attaches r to the listeners of its parents that are kubeboot's
// Gateways' (or their ListenerSets'), as the Gateway API says, and gives the nodes its rules for
// each host it attaches with; its status is in m.routes.
func (m *model) route(s *snapshot, r *routeSpec, parentsByID map[parentID]*parentListeners) {
	backends, resolved := resolveBackends(s, m.policies, r)
	unsupported := unsupportedFilter(r)
	var parents []gatewayv1.RouteParentStatus
	for _, ref := range r.parentRefs {
		kind := ptr.Deref(ref.Kind, "Gateway")
		if ptr.Deref(ref.Group, groupGateway) != groupGateway || kind != "Gateway" && kind != kindListenerSet {
			continue
		}
		p, ours := parentsByID[parentID{string(kind), types.NamespacedName{Namespace: string(ptr.Deref(ref.Namespace, gatewayv1.Namespace(r.Namespace))), Name: string(ref.Name)}}]
		if !ours {
			continue
		}
		listeners := p.listeners
		m.policies.reached(p.gateway, backends)
		ps := gatewayv1.RouteParentStatus{ParentRef: ref, ControllerName: ControllerName}
		var accepted metav1.Condition
		if unsupported != "" {
			accepted = condition(r.Generation, gatewayv1.RouteConditionAccepted, false, gatewayv1.RouteReasonUnsupportedValue,
				fmt.Sprintf("Filter %s is not supported", unsupported))
		} else {
			accepted = m.attach(s, r, ref, listeners, backends)
		}
		ps.Conditions = []metav1.Condition{accepted, resolved}
		parents = append(parents, ps)
	}
	if len(parents) > 0 {
		m.routes[r.key()] = parents
	}
}

// attach attaches r through ref to the listeners it selects and allows,
// on the hostnames both have, and says how in an Accepted condition.
func (m *model) attach(s *snapshot, r *routeSpec, ref gatewayv1.ParentReference, listeners []*listener, backends []resolvedRule) metav1.Condition {
	gen := r.Generation
	var selected []*listener
	for _, l := range listeners {
		if ref.SectionName != nil && *ref.SectionName != l.spec.Name || ref.Port != nil && *ref.Port != l.spec.Port {
			continue
		}
		selected = append(selected, l)
	}
	if len(selected) == 0 {
		return condition(gen, gatewayv1.RouteConditionAccepted, false, gatewayv1.RouteReasonNoMatchingParent,
			"No listener of the Gateway has the parentRef's sectionName and port")
	}
	var allowed []*listener
	for _, l := range selected {
		if l.accepted && allows(s, l, r.kind, r.Namespace) {
			allowed = append(allowed, l)
		}
	}
	if len(allowed) == 0 {
		return condition(gen, gatewayv1.RouteConditionAccepted, false, gatewayv1.RouteReasonNotAllowedByListeners,
			fmt.Sprintf("No listener the parentRef selects allows %ss of this namespace", r.kind))
	}
	attached, conflicted := false, ""
	for _, l := range allowed {
		hosts := intersect(string(ptr.Deref(l.spec.Hostname, "")), r.hostnames)
		if len(hosts) == 0 {
			continue
		}
		if h := l.otherKind(r.kind, hosts); h != "" {
			conflicted = h
			continue
		}
		attached = true
		l.status.AttachedRoutes++
		if !l.programmed {
			continue
		}
		// The listener's host takes the route, on its hostnames within the
		// listener's (none: any of the listener's).
		var hostnames []string
		if len(r.hostnames) > 0 {
			hostnames = hosts
		}
		m.addRules(m.ports[portKey{l.address, int32(l.spec.Port)}].host(string(ptr.Deref(l.spec.Hostname, ""))), r, hostnames, backends, l.clientCert)
	}
	switch {
	case !attached && conflicted != "":
		return condition(gen, gatewayv1.RouteConditionAccepted, false, routeReasonConflicted,
			fmt.Sprintf("An older route of another kind has hostname %q on the listener", conflicted))
	case !attached:
		return condition(gen, gatewayv1.RouteConditionAccepted, false, gatewayv1.RouteReasonNoMatchingListenerHostname,
			"No hostname of the route is a listener's")
	}
	return condition(gen, gatewayv1.RouteConditionAccepted, true, gatewayv1.RouteReasonAccepted, "")
}

// routeReasonConflicted says a route was not accepted by a listener where
// a route of the other kind, older, has one of its hostnames (the Gateway
// API names no reason for it).
const routeReasonConflicted gatewayv1.RouteConditionReason = "Conflicted"

// otherKind is a hostname of hosts that routes of a kind other than kind
// attached to l with (wildcards and "" overlapping what they cover), or
// ""; none: hosts are now kind's on l.
func (l *listener) otherKind(kind gatewayv1.Kind, hosts []string) string {
	for taken, k := range l.kinds {
		if k == kind {
			continue
		}
		for _, h := range hosts {
			if taken == "" || h == "" || taken == h || isWildcard(taken) && covers(taken, h) || isWildcard(h) && covers(h, taken) {
				return cmp.Or(taken, h)
			}
		}
	}
	if l.kinds == nil {
		l.kinds = map[string]gatewayv1.Kind{}
	}
	for _, h := range hosts {
		l.kinds[h] = kind
	}
	return ""
}

// addRules adds r's rules to a host, each match a route taking hostnames,
// whose Gateway presents clientCert to the backends it reaches over TLS.
func (m *model) addRules(hb *hostBuilder, r *routeSpec, hostnames []string, backends []resolvedRule, clientCert *dataplane.Certificate) {
	source := r.Namespace + "/" + r.Name
	for i, rule := range r.rules {
		for j, match := range rule.matches {
			sr := sortedRoute{
				route: dataplane.Route{Name: fmt.Sprintf("%s %s rule %d", r.kind, source, i), Hostnames: hostnames, Match: match,
					Filters: rule.filters, Backends: withClientCertificate(backends[i].backends, clientCert), Mirrors: mirrorsWithClientCertificate(backends[i].mirrors, clientCert),
					Timeouts: rule.timeouts, Retry: rule.retry, SessionPersistence: rule.session},
				created: r.CreationTimestamp, source: string(r.kind) + " " + source, index: i*1000 + j,
			}
			if rule.grpc != nil {
				sr.grpc = &rule.grpc[j]
			}
			hb.routes = append(hb.routes, sr)
		}
	}
}

// normalize fills in a match's defaults.
func normalize(m gatewayv1.HTTPRouteMatch) gatewayv1.HTTPRouteMatch {
	m = *m.DeepCopy()
	if m.Path == nil {
		m.Path = &gatewayv1.HTTPPathMatch{}
	}
	if m.Path.Type == nil {
		m.Path.Type = ptr.To(gatewayv1.PathMatchPathPrefix)
	}
	if m.Path.Value == nil {
		m.Path.Value = ptr.To("/")
	}
	for i := range m.Headers {
		if m.Headers[i].Type == nil {
			m.Headers[i].Type = ptr.To(gatewayv1.HeaderMatchExact)
		}
	}
	for i := range m.QueryParams {
		if m.QueryParams[i].Type == nil {
			m.QueryParams[i].Type = ptr.To(gatewayv1.QueryParamMatchExact)
		}
	}
	return m
}

// allows reports whether l takes routes of kind of namespace ns.
func allows(s *snapshot, l *listener, kind gatewayv1.Kind, ns string) bool {
	if !slices.ContainsFunc(l.status.SupportedKinds, func(k gatewayv1.RouteGroupKind) bool { return k.Kind == kind }) {
		return false
	}
	from := gatewayv1.NamespacesFromSame
	var selector *metav1.LabelSelector
	if a := l.spec.AllowedRoutes; a != nil && a.Namespaces != nil {
		from = ptr.Deref(a.Namespaces.From, gatewayv1.NamespacesFromSame)
		selector = a.Namespaces.Selector
	}
	return namespaceAllowed(s, from, selector, ns, l.namespace)
}

// intersect is the hostnames a route with hostnames serves on a listener
// with hostname ("" any): each of the route's the listener's covers, or
// the listener's where a route's wildcard covers it; "" when neither
// names one.
func intersect(listener string, hostnames []gatewayv1.Hostname) []string {
	listener = strings.ToLower(listener)
	if len(hostnames) == 0 {
		return []string{listener}
	}
	var out []string
	for _, h := range hostnames {
		r := strings.ToLower(string(h))
		switch {
		case listener == "" || r == listener:
			out = append(out, r)
		case isWildcard(listener) && covers(listener, r):
			out = append(out, r)
		case isWildcard(r) && covers(r, listener):
			out = append(out, listener)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func isWildcard(h string) bool { return strings.HasPrefix(h, "*.") }

// covers reports whether the wildcard w covers h: a name with one or more
// labels in front of w's suffix, or a wildcard of a longer suffix.
func covers(w, h string) bool {
	suffix := w[1:] // ".example.com"
	if isWildcard(h) {
		return strings.HasSuffix(h[1:], suffix) && len(h) > len(w)
	}
	return len(h) > len(suffix) && strings.HasSuffix(h, suffix)
}

// resolvedRule is a rule's backends and mirrors, resolved.
type resolvedRule struct {
	backends []dataplane.Backend
	mirrors  []dataplane.Mirror
}

// resolveBackends resolves r's rules' backends and mirrors' backends, and
// says in a ResolvedRefs condition how: the first reference that did not
// resolve names the reason. A mirror whose backend does not resolve is
// left out.
func resolveBackends(s *snapshot, policies *backendPolicies, r *routeSpec) ([]resolvedRule, metav1.Condition) {
	resolved := condition(r.Generation, gatewayv1.RouteConditionResolvedRefs, true, gatewayv1.RouteReasonResolvedRefs, "")
	unresolved := func(reason gatewayv1.RouteConditionReason, format string, args ...any) {
		if reason != "" && resolved.Status == metav1.ConditionTrue {
			resolved = condition(r.Generation, gatewayv1.RouteConditionResolvedRefs, false, reason, fmt.Sprintf(format, args...))
		}
	}
	var all []resolvedRule
	for i, rule := range r.rules {
		var rr resolvedRule
		for j, ref := range rule.backendRefs {
			b, reason, msg := resolveBackend(s, policies, r.kind, r.Namespace, ref.BackendObjectReference)
			b.Weight, b.Filters = ptr.Deref(ref.Weight, 1), ref.filters
			unresolved(reason, "rules[%d].backendRefs[%d]: %s", i, j, msg)
			rr.backends = append(rr.backends, b)
		}
		for j, f := range rule.filters {
			if f.Type != gatewayv1.HTTPRouteFilterRequestMirror || f.RequestMirror == nil {
				continue
			}
			b, reason, msg := resolveBackend(s, policies, r.kind, r.Namespace, f.RequestMirror.BackendRef)
			unresolved(reason, "rules[%d].filters[%d].requestMirror.backendRef: %s", i, j, msg)
			if reason == "" {
				rr.mirrors = append(rr.mirrors, dataplane.Mirror{Backend: b, Percent: mirrorPercent(f.RequestMirror)})
			}
		}
		all = append(all, rr)
	}
	return all, resolved
}

// mirrorPercent is the share of the requests a mirror filter copies, in
// percent: its percent, or its fraction's; all by default.
func mirrorPercent(f *gatewayv1.HTTPRequestMirrorFilter) float64 {
	switch {
	case f.Percent != nil:
		return float64(*f.Percent)
	case f.Fraction != nil && ptr.Deref(f.Fraction.Denominator, 100) > 0:
		return 100 * float64(f.Fraction.Numerator) / float64(ptr.Deref(f.Fraction.Denominator, 100))
	}
	return 100
}

// resolveBackend is the Service port ref of a route of kind names from
// namespace from, or why it is none. A GRPCRoute's backends speak HTTP/2
// in the clear (h2c), as does a port whose appProtocol says so; a port
// a BackendTLSPolicy targets is reached over TLS as it says (a
// TLSRoute's passes through, its TLS the client's).
func resolveBackend(s *snapshot, policies *backendPolicies, kind gatewayv1.Kind, from string, ref gatewayv1.BackendObjectReference) (dataplane.Backend, gatewayv1.RouteConditionReason, string) {
	ns := string(ptr.Deref(ref.Namespace, gatewayv1.Namespace(from)))
	b := dataplane.Backend{Namespace: ns, Service: string(ref.Name), Port: int32(ptr.Deref(ref.Port, 0)), Invalid: true}
	if ptr.Deref(ref.Group, "") != "" || ptr.Deref(ref.Kind, "Service") != "Service" {
		return b, gatewayv1.RouteReasonInvalidKind, fmt.Sprintf("a %s.%s is no backend: Services are", ptr.Deref(ref.Kind, "Service"), ptr.Deref(ref.Group, ""))
	}
	if ns != from && !granted(s, string(kind), from, "", "Service", ns, string(ref.Name)) {
		return b, gatewayv1.RouteReasonRefNotPermitted, fmt.Sprintf("no ReferenceGrant in %s lets %ss of %s use Service %s", ns, kind, from, ref.Name)
	}
	svc := s.services[types.NamespacedName{Namespace: ns, Name: string(ref.Name)}]
	if svc == nil {
		return b, gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s/%s does not exist", ns, ref.Name)
	}
	port, ok := servicePort(svc, b.Port)
	if !ok {
		return b, gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s/%s has no port %d", ns, ref.Name, b.Port)
	}
	b.PortName, b.Invalid = port.Name, false
	if kind == kindGRPCRoute || ptr.Deref(port.AppProtocol, "") == appProtocolH2C {
		b.Protocol = dataplane.ProtocolH2C
	}
	if p := policies.of(types.NamespacedName{Namespace: ns, Name: svc.Name}, port.Name); p != nil && kind != kindTLSRoute {
		b.TLS, b.Invalid = p.tls, p.tls == nil
	}
	return b, "", ""
}

// servicePort is svc's port numbered port.
func servicePort(svc *corev1.Service, port int32) (corev1.ServicePort, bool) {
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			return p, true
		}
	}
	return corev1.ServicePort{}, false
}

// unsupportedFilter is the first filter of r's rules, or of their
// backendRefs, the nodes do not apply, or "".
func unsupportedFilter(r *routeSpec) gatewayv1.HTTPRouteFilterType {
	for _, rule := range r.rules {
		for _, f := range rule.filters {
			if !slices.Contains(supportedFilters, f.Type) {
				return f.Type
			}
		}
		for _, b := range rule.backendRefs {
			for _, f := range b.filters {
				if !slices.Contains(backendFilters, f.Type) {
					return f.Type
				}
			}
		}
	}
	return ""
}
