package gateway

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// listenerSetOf is a ListenerSet in ns of Gateway app/g with HTTP
// listeners on port 80, one for each hostname.
func listenerSetOf(ns, name string, age int, hostnames ...string) *gatewayv1.ListenerSet {
	ls := &gatewayv1.ListenerSet{ObjectMeta: meta0(ns, name, age)}
	ls.Spec.ParentRef = gatewayv1.ParentGatewayReference{Name: "g", Namespace: ptr.To(gatewayv1.Namespace("app"))}
	for _, h := range hostnames {
		ls.Spec.Listeners = append(ls.Spec.Listeners, gatewayv1.ListenerEntry{Name: gatewayv1.SectionName(h), Port: 80, Protocol: gatewayv1.HTTPProtocolType,
			Hostname: ptr.To(gatewayv1.Hostname(h))})
	}
	return ls
}

// TestListenerSets: a Gateway takes the ListenerSets its allowedListeners
// allow; their listeners yield to the Gateway's and to older sets' where
// they conflict; routes attach to the parent they name, the Gateway's
// listeners or the set's.
func TestListenerSets(t *testing.T) {
	s := baseSnapshot()
	g := gw("app", "g", 0, httpListener("own", 80, gatewayv1.NamespacesFromSame, "own.example"))
	g.Spec.AllowedListeners = &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: ptr.To(gatewayv1.NamespacesFromSame)}}
	s.gateways = []*gatewayv1.Gateway{g}
	s.listenerSets = []*gatewayv1.ListenerSet{
		listenerSetOf("app", "first", 1, "a.example", "own.example"),
		listenerSetOf("app", "second", 2, "a.example"),
		listenerSetOf("infra", "elsewhere", 1, "b.example"),
		func() *gatewayv1.ListenerSet {
			// A TCP listener conflicts with the Gateway's port 80 (and is
			// not served anyway); the set's next listener is not affected.
			ls := listenerSetOf("app", "third", 3, "tcp", "c.example")
			ls.Spec.Listeners[0].Protocol, ls.Spec.Listeners[0].Hostname = gatewayv1.TCPProtocolType, nil
			return ls
		}(),
	}
	toSet := parent("app", "first")
	toSet.Kind = ptr.To(gatewayv1.Kind("ListenerSet"))
	s.routes = []*gatewayv1.HTTPRoute{
		httpRoute("app", "to-gateway", 0, parent("app", "g"), nil, ruleTo("web", 8080)),
		httpRoute("app", "to-set", 0, toSet, nil, ruleTo("web", 8080)),
	}
	m := build(s)

	gst := m.gateways[types.NamespacedName{Namespace: "app", Name: "g"}]
	if n := ptr.Deref(gst.AttachedListenerSets, -1); n != 2 {
		t.Errorf("attachedListenerSets %d, want 2: first and third (second's only listener conflicts, elsewhere is not allowed)", n)
	}
	if len(gst.Listeners) != 1 || gst.Listeners[0].AttachedRoutes != 1 {
		t.Errorf("the Gateway's listeners %+v, want its own, with the route that names the Gateway", gst.Listeners)
	}
	wantCond(t, "gateway's own listener", gst.Listeners[0].Conditions, "Accepted", metav1.ConditionTrue, "Accepted")

	first := m.listenerSets[types.NamespacedName{Namespace: "app", Name: "first"}]
	wantCond(t, "first", first.Conditions, "Accepted", metav1.ConditionTrue, "ListenersNotValid")
	wantCond(t, "first", first.Conditions, "Programmed", metav1.ConditionTrue, "Programmed")
	if len(first.Listeners) != 2 {
		t.Fatalf("first's listeners %+v, want 2", first.Listeners)
	}
	wantCond(t, "first's a.example", first.Listeners[0].Conditions, "Accepted", metav1.ConditionTrue, "Accepted")
	if first.Listeners[0].AttachedRoutes != 1 {
		t.Errorf("first's a.example has %d routes, want the one that names the set", first.Listeners[0].AttachedRoutes)
	}
	wantCond(t, "first's own.example", first.Listeners[1].Conditions, "Conflicted", metav1.ConditionTrue, "HostnameConflict")
	wantCond(t, "first's own.example", first.Listeners[1].Conditions, "Accepted", metav1.ConditionFalse, "HostnameConflict")
	wantCond(t, "first's own.example", first.Listeners[1].Conditions, "Programmed", metav1.ConditionFalse, "HostnameConflict")

	third := m.listenerSets[types.NamespacedName{Namespace: "app", Name: "third"}]
	wantCond(t, "third's tcp", third.Listeners[0].Conditions, "Accepted", metav1.ConditionFalse, "ProtocolConflict")
	wantCond(t, "third's tcp", third.Listeners[0].Conditions, "Programmed", metav1.ConditionFalse, "ProtocolConflict")
	wantCond(t, "third's c.example", third.Listeners[1].Conditions, "Accepted", metav1.ConditionTrue, "Accepted")
	everyReason(t, m)

	second := m.listenerSets[types.NamespacedName{Namespace: "app", Name: "second"}]
	wantCond(t, "second", second.Conditions, "Accepted", metav1.ConditionFalse, "ListenersNotValid")
	elsewhere := m.listenerSets[types.NamespacedName{Namespace: "infra", Name: "elsewhere"}]
	wantCond(t, "elsewhere", elsewhere.Conditions, "Accepted", metav1.ConditionFalse, "NotAllowed")
	if len(elsewhere.Listeners) != 0 {
		t.Errorf("a set not allowed has listeners %+v", elsewhere.Listeners)
	}

	// The nodes serve the Gateway's host and first's, each its routes.
	hosts := map[string]int{}
	for _, h := range m.config(1).Ports[0].Hosts {
		hosts[h.Hostname] = len(h.Routes)
	}
	if len(hosts) != 2 || hosts["own.example"] != 1 || hosts["a.example"] != 1 {
		t.Errorf("hosts served %v, want own.example and a.example, a route each", hosts)
	}
}

// everyReason checks that every condition of m's statuses has a reason:
// the API server refuses a status with one that has none.
func everyReason(t *testing.T, m *model) {
	t.Helper()
	check := func(what string, conds []metav1.Condition) {
		for _, c := range conds {
			if c.Reason == "" {
				t.Errorf("%s: condition %s has no reason", what, c.Type)
			}
		}
	}
	for nn, st := range m.gateways {
		check("Gateway "+nn.String(), st.Conditions)
		for _, l := range st.Listeners {
			check("Gateway "+nn.String()+" listener "+string(l.Name), l.Conditions)
		}
	}
	for nn, st := range m.listenerSets {
		check("ListenerSet "+nn.String(), st.Conditions)
		for _, l := range st.Listeners {
			check("ListenerSet "+nn.String()+" listener "+string(l.Name), l.Conditions)
		}
	}
	for key, parents := range m.routes {
		for _, p := range parents {
			check(fmt.Sprint(key), p.Conditions)
		}
	}
}
