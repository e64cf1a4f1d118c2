package reconcilers

import (
	"context"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ServiceName is the name of the Service, Endpoints and EndpointSlice the
// reconcilers write, in the default namespace.
const ServiceName = "kubernetes"

// adapter reads and writes the kubernetes Endpoints and mirrors them into
// the EndpointSlice of the same name.
type adapter struct {
	client kubernetes.Interface
}

// get returns the Endpoints, or nil when there are none.
func (a adapter) get(ctx context.Context) (*corev1.Endpoints, error) {
	e, err := a.client.CoreV1().Endpoints(metav1.NamespaceDefault).Get(ctx, ServiceName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return e, err
}

// write stores ips (sorted) and ports into the Endpoints (creating them if
// cur is nil) and the EndpointSlice.
func (a adapter) write(ctx context.Context, cur *corev1.Endpoints, ips []netip.Addr, ports []corev1.EndpointPort) error {
	want := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{
			Name:      ServiceName,
			Namespace: metav1.NamespaceDefault,
			// The EndpointSlice is written here; the mirroring controller
			// must not write another.
			Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"},
		},
	}
	if len(ips) > 0 {
		sorted := slices.Clone(ips)
		sortAddrs(sorted)
		subset := corev1.EndpointSubset{Ports: ports}
		for _, ip := range sorted {
			subset.Addresses = append(subset.Addresses, corev1.EndpointAddress{IP: ip.String()})
		}
		want.Subsets = []corev1.EndpointSubset{subset}
	}
	var err error
	if cur == nil {
		_, err = a.client.CoreV1().Endpoints(metav1.NamespaceDefault).Create(ctx, want, metav1.CreateOptions{})
	} else if !apiequality.Semantic.DeepEqual(cur.Subsets, want.Subsets) || cur.Labels[discoveryv1.LabelSkipMirror] != "true" {
		next := cur.DeepCopy()
		next.Subsets = want.Subsets
		if next.Labels == nil {
			next.Labels = map[string]string{}
		}
		next.Labels[discoveryv1.LabelSkipMirror] = "true"
		_, err = a.client.CoreV1().Endpoints(metav1.NamespaceDefault).Update(ctx, next, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	return a.writeSlice(ctx, want)
}

// writeSlice makes the EndpointSlice match the Endpoints.
func (a adapter) writeSlice(ctx context.Context, e *corev1.Endpoints) error {
	want := sliceFor(e)
	slices := a.client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault)
	cur, err := slices.Get(ctx, ServiceName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = slices.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if cur.AddressType == want.AddressType && apiequality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) &&
		apiequality.Semantic.DeepEqual(cur.Ports, want.Ports) && apiequality.Semantic.DeepEqual(cur.Labels, want.Labels) {
		return nil
	}
	if cur.AddressType != want.AddressType {
		// addressType is immutable: replace the slice.
		if err := slices.Delete(ctx, ServiceName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		_, err = slices.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	next := cur.DeepCopy()
	next.Labels = want.Labels
	next.Endpoints = want.Endpoints
	next.Ports = want.Ports
	_, err = slices.Update(ctx, next, metav1.UpdateOptions{})
	return err
}

// sliceFor is the EndpointSlice mirroring e: ready endpoints, the same
// ports, the address type of the addresses (IPv4 when there are none).
func sliceFor(e *corev1.Endpoints) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      ServiceName,
			Namespace: metav1.NamespaceDefault,
			Labels:    map[string]string{discoveryv1.LabelServiceName: ServiceName},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	ready := true
	for _, subset := range e.Subsets {
		for _, addr := range subset.Addresses {
			if ip, err := netip.ParseAddr(addr.IP); err == nil && ip.Is6() {
				s.AddressType = discoveryv1.AddressTypeIPv6
			}
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{addr.IP},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			})
		}
		for _, p := range subset.Ports {
			name, proto, port := p.Name, p.Protocol, p.Port
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &port})
		}
	}
	return s
}

// addrsOf returns the addresses of e's first subset, and whether e has the
// shape the reconcilers write (one subset; ports equal to ports when
// checkPorts).
func addrsOf(e *corev1.Endpoints, ports []corev1.EndpointPort, checkPorts bool) (ips []netip.Addr, formatOK, portsOK bool) {
	if e == nil || len(e.Subsets) != 1 {
		return nil, false, false
	}
	for _, a := range e.Subsets[0].Addresses {
		if ip, err := netip.ParseAddr(a.IP); err == nil {
			ips = append(ips, ip)
		}
	}
	portsOK = !checkPorts || apiequality.Semantic.DeepEqual(e.Subsets[0].Ports, ports)
	return ips, true, portsOK
}

func sortAddrs(ips []netip.Addr) {
	// Lexicographic order of the strings, as kube-apiserver sorts
	// endpoint addresses (and master-count trims by it).
	slices.SortFunc(ips, func(a, b netip.Addr) int {
		as, bs := a.String(), b.String()
		switch {
		case as < bs:
			return -1
		case as > bs:
			return 1
		}
		return 0
	})
}

// allAddrs returns the addresses of every subset of e.
func allAddrs(e *corev1.Endpoints) []netip.Addr {
	var out []netip.Addr
	for _, s := range e.Subsets {
		for _, a := range s.Addresses {
			if ip, err := netip.ParseAddr(a.IP); err == nil {
				out = append(out, ip)
			}
		}
	}
	return out
}

// hasSkipMirror reports whether e carries the label that keeps the
// mirroring controller from writing a second EndpointSlice.
func hasSkipMirror(e *corev1.Endpoints) bool {
	return e.Labels[discoveryv1.LabelSkipMirror] == "true"
}
