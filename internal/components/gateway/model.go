package gateway

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeboot/kubeboot/internal/components/gateway/dataplane"
)

// ControllerName is the GatewayClass controller name kubeboot serves.
const ControllerName gatewayv1.GatewayController = "kubeboot.io/gateway-controller"

// The route kinds the listeners take, by protocol.
var (
	groupGateway  = gatewayv1.Group(gatewayv1.GroupName)
	kindHTTPRoute = gatewayv1.Kind("HTTPRoute")
	kindGRPCRoute = gatewayv1.Kind("GRPCRoute")
	kindTLSRoute  = gatewayv1.Kind("TLSRoute")
	listenerKinds = map[gatewayv1.ProtocolType][]gatewayv1.Kind{
		gatewayv1.HTTPProtocolType:  {kindHTTPRoute, kindGRPCRoute},
		gatewayv1.HTTPSProtocolType: {kindHTTPRoute, kindGRPCRoute},
		gatewayv1.TLSProtocolType:   {kindTLSRoute},
	}
)

// appProtocolH2C is a Service port's appProtocol for HTTP/2 in the clear
// (KEP-3726's standard name).
const appProtocolH2C = "kubernetes.io/h2c"

// snapshot is what the model is built from: the objects as the informers
// hold them.
type snapshot struct {
	classes    []*gatewayv1.GatewayClass
	gateways   []*gatewayv1.Gateway
	routes     []*gatewayv1.HTTPRoute
	grpcRoutes []*gatewayv1.GRPCRoute
	tlsRoutes  []*gatewayv1.TLSRoute
	grants     []*gatewayv1.ReferenceGrant
	// tlsPolicies are the BackendTLSPolicies, configMaps the ConfigMaps
	// their CA certificates (and the Gateways' clients') come from.
	tlsPolicies  []*gatewayv1.BackendTLSPolicy
	listenerSets []*gatewayv1.ListenerSet
	configMaps   map[types.NamespacedName]*corev1.ConfigMap
	ingresses    []*networkingv1.Ingress
	namespaces   map[string]*corev1.Namespace
	services     map[types.NamespacedName]*corev1.Service
	secrets      map[types.NamespacedName]*corev1.Secret
	// addresses are the addresses of the nodes that serve, for the
	// Gateways' and Ingresses' status; none: nothing is programmed.
	addresses []string
	// nodes are the names of the nodes that serve, sorted.
	nodes []string
	// pool is the range of the Gateways' own addresses, if they have
	// their own (--gateway-addresses); nil: they have the nodes'.
	pool *dataplane.AddressRange
	// heldPorts are the ports the load balancer Services hold on the
	// nodes (kube-proxy leads them to their Services).
	heldPorts map[int32]string
	// ingress is how Ingresses are served; nil: not at all.
	ingress *IngressOptions
	// defaultCertificate is presented on an Ingress TLS port to a client
	// whose host no Ingress has a certificate for.
	defaultCertificate *dataplane.Certificate
}

// model is what a snapshot makes: the nodes' Config and every status.
type model struct {
	ports    map[portKey]*portBuilder
	pool     *dataplane.AddressRange
	announce []dataplane.Announcement
	classes  map[string][]metav1.Condition
	gateways map[types.NamespacedName]*gatewayv1.GatewayStatus
	routes   map[routeKey][]gatewayv1.RouteParentStatus
	policies *backendPolicies
	// listenerSets are the statuses of the ListenerSets of kubeboot's
	// Gateways.
	listenerSets map[types.NamespacedName]*gatewayv1.ListenerSetStatus
	ingresses    map[types.NamespacedName]networkingv1.IngressLoadBalancerStatus
	// ingressUnserved says, of an Ingress of kubeboot's class, which of
	// its ports the nodes cannot serve it on, and why.
	ingressUnserved map[types.NamespacedName]string
}

// portKey is a port of the nodes' own addresses (address invalid) or of
// a Gateway's own address.
type portKey struct {
	address netip.Addr
	port    int32
}

// portBuilder gathers a port's hosts and routes before they are ordered.
type portBuilder struct {
	// protocol is its listeners': HTTP, HTTPS (TLS terminated) or TLS
	// (passed through).
	protocol gatewayv1.ProtocolType
	// owner is the first Gateway (or Ingress) to hold the port: another
	// with another protocol may not.
	owner string
	hosts map[string]*hostBuilder
}

type hostBuilder struct {
	certificate *dataplane.Certificate
	validation  *dataplane.ClientValidation
	routes      []sortedRoute
}

// sortedRoute is a route and what orders it among a host's others: the
// Gateway API's precedence, then its source's age and name, then its
// place in its source.
type sortedRoute struct {
	route   dataplane.Route
	created metav1.Time
	source  string
	index   int
	// grpc ranks a GRPCRoute's match among the others of its kind (nil:
	// an HTTPRoute's or Ingress's).
	grpc *grpcRank
	// fallback routes (an Ingress's default backend) come after every
	// other route of their host.
	fallback bool
}

// listener is a Gateway's listener, or one of a ListenerSet of the
// Gateway's, as the model judges it.
type listener struct {
	// namespace is its owner's (its Gateway's or ListenerSet's), from
	// whose namespace its routes and references are judged; ownerKind the
	// owner's kind, generation its generation.
	namespace  string
	ownerKind  string
	generation int64
	// gateway is its Gateway, whose tls it has; rank orders its owner
	// among the Gateway's listeners' owners: 0 the Gateway, then its
	// ListenerSets, oldest first. A listener that conflicts with one of
	// an owner before its own is not accepted, the other is.
	gateway *gatewayv1.Gateway
	rank    int
	// owner names the owner, in messages: "Gateway ns/name".
	owner string
	// order is its place among the Gateway's listeners (its own, then its
	// ListenerSets'), which are judged in this order; conflicted says it
	// conflicts with one before it.
	order      int
	conflicted bool
	// address is its Gateway's own address, invalid when the Gateways
	// have the nodes' addresses; unaddressed says why the Gateway has no
	// address to serve at, if it has none.
	address     netip.Addr
	unaddressed string
	spec        *gatewayv1.Listener
	status      *gatewayv1.ListenerStatus
	// accepted: routes attach to it (its protocol is served, it conflicts
	// with nothing, its port is free); programmed: the nodes serve it (its
	// references resolved too).
	accepted, programmed bool
	cert                 *dataplane.Certificate
	// validation is how the listener checks its clients' certificates
	// (its Gateway's tls.frontend), nil if it does not; clientCert is
	// what its Gateway presents to backends over TLS, nil if nothing.
	validation *dataplane.ClientValidation
	clientCert *dataplane.Certificate
	// kinds are the hostnames routes attached with, and their kind: an
	// HTTPRoute and a GRPCRoute may not share one.
	kinds map[string]gatewayv1.Kind
}

// build makes the model of s.
func build(s *snapshot) *model {
	m := &model{ports: map[portKey]*portBuilder{}, pool: s.pool, classes: map[string][]metav1.Condition{},
		gateways: map[types.NamespacedName]*gatewayv1.GatewayStatus{}, routes: map[routeKey][]gatewayv1.RouteParentStatus{},
		listenerSets: map[types.NamespacedName]*gatewayv1.ListenerSetStatus{},
		ingresses:    map[types.NamespacedName]networkingv1.IngressLoadBalancerStatus{}, ingressUnserved: map[types.NamespacedName]string{}}
	ours := map[string]*gatewayv1.GatewayClass{}
	for _, c := range s.classes {
		if c.Spec.ControllerName != ControllerName {
			continue
		}
		ours[c.Name] = c
		m.classes[c.Name] = []metav1.Condition{
			condition(c.Generation, gatewayv1.GatewayClassConditionStatusAccepted, true, gatewayv1.GatewayClassReasonAccepted, "Served by kubeboot's nodes"),
			condition(c.Generation, gatewayv1.GatewayClassConditionStatusSupportedVersion, true, gatewayv1.GatewayClassReasonSupportedVersion, "Gateway API "+BundleVersion),
		}
	}
	gateways := slices.DeleteFunc(slices.Clone(s.gateways), func(g *gatewayv1.Gateway) bool { return ours[string(g.Spec.GatewayClassName)] == nil })
	slices.SortFunc(gateways, olderFirst[*gatewayv1.Gateway])
	var own map[types.NamespacedName]netip.Addr
	var unusable map[types.NamespacedName]string
	if s.pool != nil {
		own, unusable = assignAddresses(*s.pool, slices.DeleteFunc(slices.Clone(gateways), func(g *gatewayv1.Gateway) bool {
			return supportedAddresses(s.pool, g.Spec.Addresses) != ""
		}))
	}
	parents := map[parentID]*parentListeners{}
	for _, g := range gateways {
		m.gateway(s, g, own[nameOf(g)], unusable[nameOf(g)], parents)
	}
	m.policies = judgePolicies(s)
	var routes []*routeSpec
	for _, r := range s.routes {
		routes = append(routes, fromHTTPRoute(r))
	}
	for _, r := range s.grpcRoutes {
		routes = append(routes, fromGRPCRoute(r))
	}
	for _, r := range s.tlsRoutes {
		routes = append(routes, fromTLSRoute(r))
	}
	slices.SortFunc(routes, func(a, b *routeSpec) int { return olderFirst(&a.ObjectMeta, &b.ObjectMeta) })
	for _, r := range routes {
		m.route(s, r, parents)
	}
	for id, p := range parents {
		m.listenerStatuses(id, p.listeners)
	}
	if s.ingress != nil {
		m.ingressesOf(s)
	}
	return m
}

// gateway judges g's listeners, and its ListenerSets', and takes their
// ports, at g's own address if the Gateways have their own (unusable:
// why the one its spec asks for cannot be); its status is in m.gateways
// and its ListenerSets' in m.listenerSets, but for their listeners',
// which their routes complete. parents gets the listeners of g and of
// each of its ListenerSets, which routes attach to.
func (m *model) gateway(s *snapshot, g *gatewayv1.Gateway, address netip.Addr, unusable string, parents map[parentID]*parentListeners) {
	// Why the Gateway has no address to serve at, if it has none.
	unsupported := supportedAddresses(s.pool, g.Spec.Addresses)
	unaddressed := cmp.Or(unsupported, unusable)
	if unaddressed == "" && s.pool != nil && !address.IsValid() {
		unaddressed = fmt.Sprintf("Every address of the Gateways' range %s (--gateway-addresses) is another Gateway's", s.pool)
	}
	if len(s.addresses) == 0 {
		unaddressed = "No node serves Gateways yet"
	}
	clientCert, clientCertReason, clientCertMsg := gatewayClientCertificate(s, g)
	newListener := func(spec *gatewayv1.Listener, owner metav1.Object, kind string, rank int) *listener {
		return &listener{namespace: owner.GetNamespace(), ownerKind: kind, generation: owner.GetGeneration(), gateway: g, rank: rank,
			owner:   kind + " " + owner.GetNamespace() + "/" + owner.GetName(),
			address: address, unaddressed: unaddressed, spec: spec, clientCert: clientCert,
			status: &gatewayv1.ListenerStatus{Name: spec.Name, SupportedKinds: []gatewayv1.RouteGroupKind{}}}
	}
	var ls []*listener
	byPort := map[gatewayv1.PortNumber][]*listener{}
	for i := range g.Spec.Listeners {
		l := newListener(&g.Spec.Listeners[i], g, "Gateway", 0)
		l.order = len(ls)
		ls = append(ls, l)
		byPort[l.spec.Port] = append(byPort[l.spec.Port], l)
	}
	sets := m.listenerSetsOf(s, g)
	var setListeners []*listener
	for i, set := range sets {
		if !set.allowed {
			continue
		}
		for _, spec := range set.specs {
			l := newListener(spec, set.ls, kindListenerSet, i+1)
			l.order = len(ls) + len(setListeners)
			set.listeners = append(set.listeners, l)
			setListeners = append(setListeners, l)
			byPort[l.spec.Port] = append(byPort[l.spec.Port], l)
		}
	}
	accepted, programmed, unresolved, insecure := 0, 0, 0, false
	for _, l := range ls {
		m.judgeListener(s, l, byPort[l.spec.Port])
		if l.accepted {
			accepted++
		}
		if !meta.IsStatusConditionTrue(l.status.Conditions, string(gatewayv1.ListenerConditionResolvedRefs)) {
			unresolved++
		}
		if l.validation != nil && l.validation.Optional {
			insecure = true
		}
		if l.programmed {
			programmed++
			m.take(l, l.owner)
		}
	}
	st := &gatewayv1.GatewayStatus{}
	gatewayAccepted := condition(g.Generation, gatewayv1.GatewayConditionAccepted, true, gatewayv1.GatewayReasonAccepted, "")
	switch {
	case unsupported != "":
		gatewayAccepted = condition(g.Generation, gatewayv1.GatewayConditionAccepted, false, gatewayv1.GatewayReasonUnsupportedAddress, unsupported)
	case accepted < len(ls):
		gatewayAccepted = condition(g.Generation, gatewayv1.GatewayConditionAccepted, accepted > 0, gatewayv1.GatewayReasonListenersNotValid,
			fmt.Sprintf("%d of %d listeners are not valid", len(ls)-accepted, len(ls)))
	}
	st.Conditions = append(st.Conditions, gatewayAccepted)
	switch {
	case clientCertReason != "":
		st.Conditions = append(st.Conditions, condition(g.Generation, gatewayv1.GatewayConditionResolvedRefs, false, clientCertReason, clientCertMsg))
	case unresolved > 0:
		st.Conditions = append(st.Conditions, condition(g.Generation, gatewayv1.GatewayConditionResolvedRefs, false, gatewayv1.GatewayReasonListenersNotResolved,
			fmt.Sprintf("%d of %d listeners' references do not resolve", unresolved, len(ls))))
	default:
		st.Conditions = append(st.Conditions, condition(g.Generation, gatewayv1.GatewayConditionResolvedRefs, true, gatewayv1.GatewayReasonResolvedRefs, ""))
	}
	if insecure {
		st.Conditions = append(st.Conditions, condition(g.Generation, gatewayv1.GatewayConditionInsecureFrontendValidationMode, true, gatewayv1.GatewayReasonConfigurationChanged,
			"A listener serves clients without a valid certificate (tls.frontend's mode AllowInsecureFallback)"))
	}
	switch {
	case programmed > 0:
		st.Conditions = append(st.Conditions, condition(g.Generation, gatewayv1.GatewayConditionProgrammed, true, gatewayv1.GatewayReasonProgrammed, ""))
		addresses := s.addresses
		if address.IsValid() {
			addresses = []string{address.String()}
			m.announce = append(m.announce, dataplane.Announcement{Address: address, Node: announcer(address, s.nodes)})
		}
		for _, a := range addresses {
			st.Addresses = append(st.Addresses, gatewayv1.GatewayStatusAddress{Type: ptr.To(gatewayv1.IPAddressType), Value: a})
		}
	case unsupported != "":
		st.Conditions = append(st.Conditions, condition(g.Generation, gatewayv1.GatewayConditionProgrammed, false, gatewayv1.GatewayReasonInvalid, unsupported))
	case unusable != "":
		st.Conditions = append(st.Conditions, condition(g.Generation, gatewayv1.GatewayConditionProgrammed, false, gatewayv1.GatewayReasonAddressNotUsable, unusable))
	case s.pool != nil && !address.IsValid() && len(s.addresses) > 0:
		st.Conditions = append(st.Conditions, condition(g.Generation, gatewayv1.GatewayConditionProgrammed, false, gatewayv1.GatewayReasonAddressNotAssigned, unaddressed))
	case len(s.addresses) == 0:
		st.Conditions = append(st.Conditions, condition(g.Generation, gatewayv1.GatewayConditionProgrammed, false, gatewayv1.GatewayReasonNoResources,
			"No node serves Gateways: kubeboot's nodes (server --node, agents) serve them on their addresses; simulated nodes do not"))
	default:
		st.Conditions = append(st.Conditions, condition(g.Generation, gatewayv1.GatewayConditionProgrammed, false, gatewayv1.GatewayReasonInvalid,
			"No listener can be served"))
	}
	for _, l := range setListeners {
		m.judgeListener(s, l, byPort[l.spec.Port])
		if l.programmed {
			m.take(l, l.owner)
		}
	}
	attached := m.judgeListenerSets(sets, gatewayAccepted.Status == metav1.ConditionTrue)
	st.AttachedListenerSets = ptr.To(attached)
	m.gateways[types.NamespacedName{Namespace: g.Namespace, Name: g.Name}] = st
	parents[parentID{"Gateway", nameOf(g)}] = &parentListeners{nameOf(g), ls}
	for _, set := range sets {
		parents[parentID{kindListenerSet, nameOf(set.ls)}] = &parentListeners{nameOf(g), set.listeners}
	}
}

// judgeListener sets l's supported kinds and conditions: its protocol,
// route kinds, certificates and conflicts with the other listeners of its
// port (samePort, l among them) and with what holds the port elsewhere.
// A listener whose references do not resolve still takes routes, and is
// not programmed.
func (m *model) judgeListener(s *snapshot, l *listener, samePort []*listener) {
	gen := l.generation
	var conds []metav1.Condition
	notAccepted := ""
	has := func(t gatewayv1.ListenerConditionType) bool {
		return slices.ContainsFunc(conds, func(c metav1.Condition) bool { return c.Type == string(t) })
	}
	refuse := func(t gatewayv1.ListenerConditionType, reason gatewayv1.ListenerConditionReason, msg string) {
		if notAccepted == "" {
			notAccepted = string(reason)
		}
		if !has(t) {
			conds = append(conds, condition(gen, t, t == gatewayv1.ListenerConditionConflicted, reason, msg))
		}
	}
	// Conflicts first: a listener that conflicts says so, whatever else
	// it is. The Gateway's own listeners that conflict are all refused;
	// a ListenerSet's yields to each listener before it that is not.
	for _, o := range samePort {
		if o == l || (l.rank > 0 || o.rank > 0) && (o.order > l.order || o.conflicted) {
			continue
		}
		reason, msg := gatewayv1.ListenerConditionReason(""), ""
		switch {
		case o.spec.Protocol != l.spec.Protocol:
			reason, msg = gatewayv1.ListenerReasonProtocolConflict, fmt.Sprintf("Listener %s has port %d with protocol %s", o.spec.Name, l.spec.Port, o.spec.Protocol)
		case ptr.Deref(o.spec.Hostname, "") == ptr.Deref(l.spec.Hostname, ""):
			reason, msg = gatewayv1.ListenerReasonHostnameConflict, fmt.Sprintf("Listener %s has port %d and the same hostname", o.spec.Name, l.spec.Port)
		default:
			continue
		}
		if o.owner != l.owner {
			msg = fmt.Sprintf("%s of %s", msg, o.owner)
		}
		l.conflicted = true
		refuse(gatewayv1.ListenerConditionConflicted, reason, msg)
		refuse(gatewayv1.ListenerConditionAccepted, reason, msg)
		break
	}
	var unresolved *metav1.Condition
	kinds, served := listenerKinds[l.spec.Protocol]
	switch {
	case !served:
		refuse(gatewayv1.ListenerConditionAccepted, gatewayv1.ListenerReasonUnsupportedProtocol,
			fmt.Sprintf("Protocol %s is not supported: HTTP, HTTPS and TLS are", l.spec.Protocol))
	default:
		var kindsOK bool
		if l.status.SupportedKinds, kindsOK = supportedKinds(kinds, l.spec.AllowedRoutes); !kindsOK {
			c := condition(gen, gatewayv1.ListenerConditionResolvedRefs, false, gatewayv1.ListenerReasonInvalidRouteKinds,
				fmt.Sprintf("A route kind in allowedRoutes is not supported: a %s listener takes %s", l.spec.Protocol, kindNames(kinds)))
			unresolved = &c
		}
	}
	if terminates(l.spec) && unresolved == nil {
		cert, reason, msg := certificate(s, l.ownerKind, l.namespace, l.spec.TLS)
		if reason != "" {
			c := condition(gen, gatewayv1.ListenerConditionResolvedRefs, false, reason, msg)
			unresolved = &c
		}
		l.cert = cert
	}
	if l.spec.Protocol == gatewayv1.HTTPSProtocolType {
		v, reason, msg, noneValid := frontendValidation(s, l.gateway, l.spec.Port)
		if reason != "" && unresolved == nil {
			c := condition(gen, gatewayv1.ListenerConditionResolvedRefs, false, reason, msg)
			unresolved = &c
		}
		if reason != "" && noneValid {
			refuse(gatewayv1.ListenerConditionAccepted, gatewayv1.ListenerReasonNoValidCACertificate, "No CA certificate of the listener's client validation resolves")
		}
		l.validation = v
	}
	if notAccepted == "" {
		if holder := portHolder(s, m, l); holder != "" {
			refuse(gatewayv1.ListenerConditionAccepted, gatewayv1.ListenerReasonPortUnavailable,
				fmt.Sprintf("Port %d is held by %s", l.spec.Port, holder))
		}
	}
	l.accepted = notAccepted == ""
	l.programmed = l.accepted && unresolved == nil && l.unaddressed == ""
	if !has(gatewayv1.ListenerConditionAccepted) {
		if l.accepted {
			conds = append(conds, condition(gen, gatewayv1.ListenerConditionAccepted, true, gatewayv1.ListenerReasonAccepted, ""))
		} else {
			conds = append(conds, condition(gen, gatewayv1.ListenerConditionAccepted, false, gatewayv1.ListenerReasonInvalid, "The listener is not valid"))
		}
	}
	if !has(gatewayv1.ListenerConditionConflicted) {
		conds = append(conds, condition(gen, gatewayv1.ListenerConditionConflicted, false, gatewayv1.ListenerReasonNoConflicts, ""))
	}
	if unresolved != nil {
		conds = append(conds, *unresolved)
	} else {
		conds = append(conds, condition(gen, gatewayv1.ListenerConditionResolvedRefs, true, gatewayv1.ListenerReasonResolvedRefs, ""))
	}
	switch {
	case l.programmed:
		conds = append(conds, condition(gen, gatewayv1.ListenerConditionProgrammed, true, gatewayv1.ListenerReasonProgrammed, ""))
	case l.accepted && unresolved == nil:
		conds = append(conds, condition(gen, gatewayv1.ListenerConditionProgrammed, false, gatewayv1.ListenerReasonPending, l.unaddressed))
	case l.conflicted:
		conds = append(conds, condition(gen, gatewayv1.ListenerConditionProgrammed, false, gatewayv1.ListenerConditionReason(notAccepted), "The listener conflicts"))
	default:
		conds = append(conds, condition(gen, gatewayv1.ListenerConditionProgrammed, false, gatewayv1.ListenerReasonInvalid, "The listener cannot be served"))
	}
	l.status.Conditions = conds
}

// portHolder names what holds l's port on the nodes that l may not share
// it with: a load balancer Service, or a Gateway or Ingress that serves
// it with the other protocol.
func portHolder(s *snapshot, m *model, l *listener) string {
	if svc, ok := s.heldPorts[int32(l.spec.Port)]; ok && !l.address.IsValid() {
		return "LoadBalancer Service " + svc
	}
	if p, ok := m.ports[portKey{l.address, int32(l.spec.Port)}]; ok && p.protocol != l.spec.Protocol {
		return p.owner
	}
	return ""
}

// take gives a valid listener's port and hosts to the nodes' Config.
func (m *model) take(l *listener, source string) {
	p := m.port(portKey{l.address, int32(l.spec.Port)}, l.spec.Protocol, source)
	if l.cert != nil {
		h := p.host(ptr.Deref((*string)(l.spec.Hostname), ""))
		if h.certificate == nil {
			h.certificate, h.validation = l.cert, l.validation
		}
	}
}

func (m *model) port(key portKey, protocol gatewayv1.ProtocolType, source string) *portBuilder {
	p, ok := m.ports[key]
	if !ok {
		p = &portBuilder{protocol: protocol, owner: source, hosts: map[string]*hostBuilder{}}
		m.ports[key] = p
	}
	return p
}

func (p *portBuilder) host(name string) *hostBuilder {
	name = strings.ToLower(name)
	h, ok := p.hosts[name]
	if !ok {
		h = &hostBuilder{}
		p.hosts[name] = h
	}
	return h
}

// supportedKinds are the route kinds of allowed that a listener taking
// the kinds takes can take (all of those when allowed names none), and
// whether every kind allowed names is one.
func supportedKinds(takes []gatewayv1.Kind, allowed *gatewayv1.AllowedRoutes) ([]gatewayv1.RouteGroupKind, bool) {
	kinds := []gatewayv1.RouteGroupKind{}
	if allowed == nil || len(allowed.Kinds) == 0 {
		for _, k := range takes {
			kinds = append(kinds, gatewayv1.RouteGroupKind{Group: &groupGateway, Kind: k})
		}
		return kinds, true
	}
	ok := true
	for _, k := range allowed.Kinds {
		if ptr.Deref(k.Group, groupGateway) == groupGateway && slices.Contains(takes, k.Kind) {
			kinds = append(kinds, gatewayv1.RouteGroupKind{Group: &groupGateway, Kind: k.Kind})
		} else {
			ok = false
		}
	}
	return kinds, ok
}

// kindNames lists kinds for a message: "HTTPRoute and GRPCRoute".
func kindNames(kinds []gatewayv1.Kind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// terminates reports whether l ends its clients' TLS sessions with a
// certificate of its own: HTTPS, and TLS of mode Terminate (the other,
// Passthrough, passes them to its routes' backends).
func terminates(l *gatewayv1.Listener) bool {
	switch l.Protocol {
	case gatewayv1.HTTPSProtocolType:
		return true
	case gatewayv1.TLSProtocolType:
		return l.TLS == nil || ptr.Deref(l.TLS.Mode, gatewayv1.TLSModeTerminate) == gatewayv1.TLSModeTerminate
	}
	return false
}

// certificate is the certificate a listener (of an owner of fromKind in
// fromNamespace) that terminates TLS presents, or the reason and message
// its references do not resolve.
func certificate(s *snapshot, fromKind, fromNamespace string, t *gatewayv1.ListenerTLSConfig) (*dataplane.Certificate, gatewayv1.ListenerConditionReason, string) {
	if t == nil || len(t.CertificateRefs) == 0 {
		return nil, gatewayv1.ListenerReasonInvalidCertificateRef, "A listener that terminates TLS needs tls.certificateRefs"
	}
	if t.Mode != nil && *t.Mode != gatewayv1.TLSModeTerminate {
		return nil, gatewayv1.ListenerReasonInvalidCertificateRef, "An HTTPS listener terminates TLS (tls.mode Terminate)"
	}
	return secretCertificate(s, fromKind, fromNamespace, "certificateRefs[0]", t.CertificateRefs[0])
}

// granted reports whether a ReferenceGrant in toNamespace lets objects of
// fromKind in fromNamespace refer to the toKind named name (any, when the
// grant names none).
func granted(s *snapshot, fromKind, fromNamespace, toGroup, toKind, toNamespace, name string) bool {
	for _, g := range s.grants {
		if g.Namespace != toNamespace {
			continue
		}
		from := slices.ContainsFunc(g.Spec.From, func(f gatewayv1.ReferenceGrantFrom) bool {
			return string(f.Group) == gatewayv1.GroupName && string(f.Kind) == fromKind && string(f.Namespace) == fromNamespace
		})
		to := slices.ContainsFunc(g.Spec.To, func(t gatewayv1.ReferenceGrantTo) bool {
			return string(t.Group) == toGroup && string(t.Kind) == toKind && (t.Name == nil || string(*t.Name) == name)
		})
		if from && to {
			return true
		}
	}
	return false
}

// condition is a condition of type t of an object at generation gen.
func condition[T, R ~string](gen int64, t T, status bool, reason R, msg string) metav1.Condition {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: string(t), Status: s, Reason: string(reason), Message: msg, ObservedGeneration: gen}
}

// olderFirst orders objects by age, then by namespace and name.
func olderFirst[T metav1.Object](a, b T) int {
	if c := a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time); c != 0 {
		return c
	}
	return cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
}

// config is the nodes' Config of m, at generation.
func (m *model) config(generation int64) *dataplane.Config {
	c := &dataplane.Config{Version: dataplane.Version, Generation: generation, Pool: m.pool}
	c.Announce = slices.SortedFunc(slices.Values(m.announce), func(a, b dataplane.Announcement) int { return a.Address.Compare(b.Address) })
	ports := slices.SortedFunc(maps.Keys(m.ports), func(a, b portKey) int {
		return cmp.Or(a.address.Compare(b.address), cmp.Compare(a.port, b.port))
	})
	for _, key := range ports {
		pb := m.ports[key]
		p := dataplane.Port{Address: key.address, Port: key.port, TLS: pb.protocol == gatewayv1.HTTPSProtocolType, Passthrough: pb.protocol == gatewayv1.TLSProtocolType}
		names := make([]string, 0, len(pb.hosts))
		for n := range pb.hosts {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			hb := pb.hosts[n]
			slices.SortStableFunc(hb.routes, precedence)
			h := dataplane.Host{Hostname: n, Certificate: hb.certificate, ClientValidation: hb.validation}
			for _, r := range hb.routes {
				h.Routes = append(h.Routes, r.route)
			}
			p.Hosts = append(p.Hosts, h)
		}
		c.Ports = append(c.Ports, p)
	}
	return c
}

// precedence orders a host's routes as the Gateway API says, fallbacks
// last: an exact path first, then a regular expression's, then the longest prefix; then
// a method match; then the most header matches, then the most query
// parameter matches; then the oldest source, its namespace and name, and
// its rule's place.
func precedence(a, b sortedRoute) int {
	if a.fallback != b.fallback {
		if b.fallback {
			return -1
		}
		return 1
	}
	// Two kinds share a host only from listeners of different Gateways
	// (on one listener the older kind holds a hostname): HTTPRoutes
	// first, as the order must be total.
	if (a.grpc == nil) != (b.grpc == nil) {
		if a.grpc == nil {
			return -1
		}
		return 1
	}
	if a.grpc != nil {
		return grpcPrecedence(a, b)
	}
	pa, pb := a.route.Match.Path, b.route.Match.Path
	rank := func(p *gatewayv1.HTTPPathMatch) int {
		switch ptr.Deref(p.Type, gatewayv1.PathMatchPathPrefix) {
		case gatewayv1.PathMatchExact:
			return 0
		case gatewayv1.PathMatchRegularExpression:
			return 1
		}
		return 2
	}
	if c := cmp.Compare(rank(pa), rank(pb)); c != 0 {
		return c
	}
	if c := cmp.Compare(len(ptr.Deref(pb.Value, "")), len(ptr.Deref(pa.Value, ""))); c != 0 {
		return c
	}
	hasMethod := func(r sortedRoute) int {
		if r.route.Match.Method != nil {
			return 0
		}
		return 1
	}
	if c := cmp.Compare(hasMethod(a), hasMethod(b)); c != 0 {
		return c
	}
	if c := cmp.Compare(len(b.route.Match.Headers), len(a.route.Match.Headers)); c != 0 {
		return c
	}
	if c := cmp.Compare(len(b.route.Match.QueryParams), len(a.route.Match.QueryParams)); c != 0 {
		return c
	}
	if c := a.created.Compare(b.created.Time); c != 0 {
		return c
	}
	return cmp.Or(strings.Compare(a.source, b.source), cmp.Compare(a.index, b.index))
}

// grpcPrecedence orders two GRPCRoutes' matches as the Gateway API says:
// the longest service, then the longest method, then the most header
// matches; then the oldest source, its namespace and name, and its
// rule's place.
func grpcPrecedence(a, b sortedRoute) int {
	return cmp.Or(cmp.Compare(b.grpc.service, a.grpc.service), cmp.Compare(b.grpc.method, a.grpc.method),
		cmp.Compare(len(b.route.Match.Headers), len(a.route.Match.Headers)),
		a.created.Compare(b.created.Time), strings.Compare(a.source, b.source), cmp.Compare(a.index, b.index))
}
