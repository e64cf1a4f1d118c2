package gateway

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// kindListenerSet is the kind of a ListenerSet, a parent of routes.
const kindListenerSet = "ListenerSet"

// parentID is a parent routes attach to: a Gateway or a ListenerSet.
type parentID struct {
	kind string
	name types.NamespacedName
}

// parentListeners are a parent's listeners, and its Gateway.
type parentListeners struct {
	gateway   types.NamespacedName
	listeners []*listener
}

// listenerSet is a ListenerSet of one of kubeboot's Gateways as the
// model judges it.
type listenerSet struct {
	ls *gatewayv1.ListenerSet
	// allowed: its Gateway's allowedListeners take it (else why not).
	allowed bool
	why     string
	// specs are its listeners' specs, listeners the listeners judged.
	specs     []*gatewayv1.Listener
	listeners []*listener
}

// listenerSetsOf are the ListenerSets whose parent is g, oldest first,
// each allowed or not by g's allowedListeners.
func (m *model) listenerSetsOf(s *snapshot, g *gatewayv1.Gateway) []*listenerSet {
	var sets []*listenerSet
	for _, ls := range s.listenerSets {
		ref := ls.Spec.ParentRef
		if ptr.Deref(ref.Group, groupGateway) != groupGateway || ptr.Deref(ref.Kind, "Gateway") != "Gateway" ||
			string(ref.Name) != g.Name || string(ptr.Deref(ref.Namespace, gatewayv1.Namespace(ls.Namespace))) != g.Namespace {
			continue
		}
		set := &listenerSet{ls: ls}
		from, selector := gatewayv1.NamespacesFromNone, (*metav1.LabelSelector)(nil)
		if a := g.Spec.AllowedListeners; a != nil && a.Namespaces != nil {
			from, selector = ptr.Deref(a.Namespaces.From, gatewayv1.NamespacesFromNone), a.Namespaces.Selector
		}
		if set.allowed = namespaceAllowed(s, from, selector, ls.Namespace, g.Namespace); !set.allowed {
			set.why = fmt.Sprintf("Gateway %s/%s's allowedListeners (from %s) do not take ListenerSets of namespace %s", g.Namespace, g.Name, from, ls.Namespace)
		}
		for i := range ls.Spec.Listeners {
			e := &ls.Spec.Listeners[i]
			set.specs = append(set.specs, &gatewayv1.Listener{Name: e.Name, Hostname: e.Hostname, Port: e.Port, Protocol: e.Protocol,
				TLS: e.TLS, AllowedRoutes: e.AllowedRoutes})
		}
		sets = append(sets, set)
	}
	slices.SortFunc(sets, func(a, b *listenerSet) int { return olderFirst(a.ls, b.ls) })
	return sets
}

// namespaceAllowed reports whether an object of namespace ns is taken by
// an allowance from (and selector) of an object of namespace own: a
// listener's allowedRoutes, a Gateway's allowedListeners.
func namespaceAllowed(s *snapshot, from gatewayv1.FromNamespaces, selector *metav1.LabelSelector, ns, own string) bool {
	switch from {
	case gatewayv1.NamespacesFromAll:
		return true
	case gatewayv1.NamespacesFromSelector:
		sel, err := metav1.LabelSelectorAsSelector(selector)
		n := s.namespaces[ns]
		return err == nil && selector != nil && n != nil && sel.Matches(labels.Set(n.Labels))
	case gatewayv1.NamespacesFromSame:
		return ns == own
	}
	return false
}

// judgeListenerSets gives each of sets its conditions, once its
// listeners are judged: accepted when its Gateway takes it and one of
// its listeners is valid. It returns how many are accepted.
func (m *model) judgeListenerSets(sets []*listenerSet, gatewayAccepted bool) int32 {
	var attached int32
	for _, set := range sets {
		gen := set.ls.Generation
		st := &gatewayv1.ListenerSetStatus{}
		// A listener of a set is valid when it is accepted and its
		// references resolve (a Gateway's is when it is accepted).
		accepted, programmed := 0, 0
		for _, l := range set.listeners {
			if l.accepted && meta.IsStatusConditionTrue(l.status.Conditions, string(gatewayv1.ListenerConditionResolvedRefs)) {
				accepted++
			}
			if l.programmed {
				programmed++
			}
		}
		switch {
		case !set.allowed:
			st.Conditions = []metav1.Condition{
				condition(gen, gatewayv1.ListenerSetConditionAccepted, false, gatewayv1.ListenerSetReasonNotAllowed, set.why),
				condition(gen, gatewayv1.ListenerSetConditionProgrammed, false, gatewayv1.ListenerSetReasonNotAllowed, set.why)}
		case !gatewayAccepted:
			st.Conditions = []metav1.Condition{
				condition(gen, gatewayv1.ListenerSetConditionAccepted, false, gatewayv1.ListenerSetReasonParentNotAccepted, "Its Gateway is not accepted"),
				condition(gen, gatewayv1.ListenerSetConditionProgrammed, false, gatewayv1.ListenerSetReasonParentNotAccepted, "Its Gateway is not accepted")}
		case accepted == 0:
			msg := "None of its listeners is valid"
			st.Conditions = []metav1.Condition{
				condition(gen, gatewayv1.ListenerSetConditionAccepted, false, gatewayv1.ListenerSetReasonListenersNotValid, msg),
				condition(gen, gatewayv1.ListenerSetConditionProgrammed, false, gatewayv1.ListenerSetReasonListenersNotValid, msg)}
		default:
			attached++
			acc := condition(gen, gatewayv1.ListenerSetConditionAccepted, true, gatewayv1.ListenerSetReasonAccepted, "")
			if accepted < len(set.listeners) {
				acc = condition(gen, gatewayv1.ListenerSetConditionAccepted, true, gatewayv1.ListenerSetReasonListenersNotValid,
					fmt.Sprintf("%d of %d listeners are not valid", len(set.listeners)-accepted, len(set.listeners)))
			}
			prog := condition(gen, gatewayv1.ListenerSetConditionProgrammed, true, gatewayv1.ListenerSetReasonProgrammed, "")
			if programmed == 0 {
				prog = condition(gen, gatewayv1.ListenerSetConditionProgrammed, false, gatewayv1.ListenerSetReasonPending, "None of its listeners is served yet")
			}
			st.Conditions = []metav1.Condition{acc, prog}
		}
		m.listenerSets[nameOf(set.ls)] = st
	}
	return attached
}

// listenerStatuses completes a parent's status with its listeners', once
// routes have attached to them.
func (m *model) listenerStatuses(id parentID, ls []*listener) {
	if id.kind == kindListenerSet {
		st := m.listenerSets[id.name]
		for _, l := range ls {
			st.Listeners = append(st.Listeners, gatewayv1.ListenerEntryStatus{Name: l.status.Name, SupportedKinds: l.status.SupportedKinds,
				AttachedRoutes: l.status.AttachedRoutes, Conditions: l.status.Conditions})
		}
		return
	}
	st := m.gateways[id.name]
	for _, l := range ls {
		st.Listeners = append(st.Listeners, *l.status)
	}
}
