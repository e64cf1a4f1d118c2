package gateway

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeboot/kubeboot/internal/components/gateway/dataplane"
)

// supportedFilters are the HTTPRoute filters the nodes apply.
var supportedFilters = []gatewayv1.HTTPRouteFilterType{
	gatewayv1.HTTPRouteFilterRequestHeaderModifier, gatewayv1.HTTPRouteFilterResponseHeaderModifier,
	gatewayv1.HTTPRouteFilterRequestRedirect, gatewayv1.HTTPRouteFilterURLRewrite,
}

// route attaches r to the listeners of its parents that are kubeboot's
// Gateways', as the Gateway API says, and gives the nodes its rules for
// each host it attaches with; its status is in m.routes.
func (m *model) route(s *snapshot, r *gatewayv1.HTTPRoute, gateways map[types.NamespacedName][]*listener) {
	backends, resolved := resolveBackends(s, r)
	unsupported := unsupportedFilter(r)
	var parents []gatewayv1.RouteParentStatus
	for _, ref := range r.Spec.ParentRefs {
		if ptr.Deref(ref.Group, groupGateway) != groupGateway || ptr.Deref(ref.Kind, "Gateway") != "Gateway" {
			continue
		}
		gw := types.NamespacedName{Namespace: string(ptr.Deref(ref.Namespace, gatewayv1.Namespace(r.Namespace))), Name: string(ref.Name)}
		listeners, ours := gateways[gw]
		if !ours {
			continue
		}
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
		m.routes[types.NamespacedName{Namespace: r.Namespace, Name: r.Name}] = parents
	}
}

// attach attaches r through ref to the listeners it selects and allows,
// on the hostnames both have, and says how in an Accepted condition.
func (m *model) attach(s *snapshot, r *gatewayv1.HTTPRoute, ref gatewayv1.ParentReference, listeners []*listener, backends [][]dataplane.Backend) metav1.Condition {
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
		if l.accepted && allows(s, l, r.Namespace) {
			allowed = append(allowed, l)
		}
	}
	if len(allowed) == 0 {
		return condition(gen, gatewayv1.RouteConditionAccepted, false, gatewayv1.RouteReasonNotAllowedByListeners,
			"No listener the parentRef selects allows HTTPRoutes of this namespace")
	}
	attached := false
	for _, l := range allowed {
		hosts := intersect(string(ptr.Deref(l.spec.Hostname, "")), r.Spec.Hostnames)
		if len(hosts) == 0 {
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
		if len(r.Spec.Hostnames) > 0 {
			hostnames = hosts
		}
		m.addRules(m.ports[int32(l.spec.Port)].host(string(ptr.Deref(l.spec.Hostname, ""))), r, hostnames, backends)
	}
	if !attached {
		return condition(gen, gatewayv1.RouteConditionAccepted, false, gatewayv1.RouteReasonNoMatchingListenerHostname,
			"No hostname of the route is a listener's")
	}
	return condition(gen, gatewayv1.RouteConditionAccepted, true, gatewayv1.RouteReasonAccepted, "")
}

// addRules adds r's rules to a host, each match a route taking hostnames.
func (m *model) addRules(hb *hostBuilder, r *gatewayv1.HTTPRoute, hostnames []string, backends [][]dataplane.Backend) {
	source := r.Namespace + "/" + r.Name
	for i, rule := range r.Spec.Rules {
		matches := rule.Matches
		if len(matches) == 0 {
			matches = []gatewayv1.HTTPRouteMatch{{}}
		}
		for j, match := range matches {
			hb.routes = append(hb.routes, sortedRoute{
				route: dataplane.Route{Name: fmt.Sprintf("HTTPRoute %s rule %d", source, i), Hostnames: hostnames, Match: normalize(match),
					Filters: rule.Filters, Backends: backends[i]},
				created: r.CreationTimestamp, source: source, index: i*1000 + j,
			})
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

// allows reports whether l takes HTTPRoutes of namespace ns.
func allows(s *snapshot, l *listener, ns string) bool {
	if !slices.ContainsFunc(l.status.SupportedKinds, func(k gatewayv1.RouteGroupKind) bool { return k.Kind == kindHTTPRoute }) {
		return false
	}
	from := gatewayv1.NamespacesFromSame
	var selector *metav1.LabelSelector
	if a := l.spec.AllowedRoutes; a != nil && a.Namespaces != nil {
		from = ptr.Deref(a.Namespaces.From, gatewayv1.NamespacesFromSame)
		selector = a.Namespaces.Selector
	}
	switch from {
	case gatewayv1.NamespacesFromAll:
		return true
	case gatewayv1.NamespacesFromSelector:
		sel, err := metav1.LabelSelectorAsSelector(selector)
		n := s.namespaces[ns]
		return err == nil && selector != nil && n != nil && sel.Matches(labels.Set(n.Labels))
	case gatewayv1.NamespacesFromSame:
		return ns == l.namespace
	}
	return false
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

// resolveBackends resolves r's rules' backends, and says in a
// ResolvedRefs condition how: the first reference that did not resolve
// names the reason.
func resolveBackends(s *snapshot, r *gatewayv1.HTTPRoute) ([][]dataplane.Backend, metav1.Condition) {
	resolved := condition(r.Generation, gatewayv1.RouteConditionResolvedRefs, true, gatewayv1.RouteReasonResolvedRefs, "")
	var all [][]dataplane.Backend
	for i, rule := range r.Spec.Rules {
		var backends []dataplane.Backend
		for j, ref := range rule.BackendRefs {
			b, reason, msg := resolveBackend(s, r.Namespace, ref.BackendObjectReference)
			b.Weight = ptr.Deref(ref.Weight, 1)
			if reason != "" && resolved.Status == metav1.ConditionTrue {
				resolved = condition(r.Generation, gatewayv1.RouteConditionResolvedRefs, false, reason,
					fmt.Sprintf("rules[%d].backendRefs[%d]: %s", i, j, msg))
			}
			backends = append(backends, b)
		}
		all = append(all, backends)
	}
	return all, resolved
}

// resolveBackend is the Service port ref names from namespace from, or why
// it is none.
func resolveBackend(s *snapshot, from string, ref gatewayv1.BackendObjectReference) (dataplane.Backend, gatewayv1.RouteConditionReason, string) {
	ns := string(ptr.Deref(ref.Namespace, gatewayv1.Namespace(from)))
	b := dataplane.Backend{Namespace: ns, Service: string(ref.Name), Port: int32(ptr.Deref(ref.Port, 0)), Invalid: true}
	if ptr.Deref(ref.Group, "") != "" || ptr.Deref(ref.Kind, "Service") != "Service" {
		return b, gatewayv1.RouteReasonInvalidKind, fmt.Sprintf("a %s.%s is no backend: Services are", ptr.Deref(ref.Kind, "Service"), ptr.Deref(ref.Group, ""))
	}
	if ns != from && !granted(s, "HTTPRoute", from, "", "Service", ns, string(ref.Name)) {
		return b, gatewayv1.RouteReasonRefNotPermitted, fmt.Sprintf("no ReferenceGrant in %s lets HTTPRoutes of %s use Service %s", ns, from, ref.Name)
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

// unsupportedFilter is the first filter of r's rules the nodes do not
// apply, or "".
func unsupportedFilter(r *gatewayv1.HTTPRoute) gatewayv1.HTTPRouteFilterType {
	for _, rule := range r.Spec.Rules {
		for _, f := range rule.Filters {
			if !slices.Contains(supportedFilters, f.Type) {
				return f.Type
			}
		}
	}
	return ""
}
