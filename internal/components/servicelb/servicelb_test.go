package servicelb

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeboot/kubeboot/internal/platform/lbnodes"
)

func node(name string, ready bool, labels map[string]string, addrs ...corev1.NodeAddress) *corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Addresses: addrs, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
}

func internal(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}
}

// TestIngress: Ready nodes not excluded, their ExternalIPs over their
// InternalIPs, of the Service's families, sorted and each once.
func TestIngress(t *testing.T) {
	nodes := []*corev1.Node{
		node("b", true, nil, internal("10.0.0.2")),
		node("a", true, nil, internal("10.0.0.1"), internal("fd00::1")),
		node("public", true, nil, internal("10.0.0.3"), corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.3"}),
		node("down", false, nil, internal("10.0.0.4")),
		node("excluded", true, map[string]string{lbnodes.ExcludeLabel: ""}, internal("10.0.0.5")),
		node("twin", true, nil, internal("10.0.0.1")),
	}
	for _, tc := range []struct {
		name     string
		families []corev1.IPFamily
		want     []string
	}{
		{"IPv4", []corev1.IPFamily{corev1.IPv4Protocol}, []string{"10.0.0.1", "10.0.0.2", "203.0.113.3"}},
		{"no families set", nil, []string{"10.0.0.1", "10.0.0.2", "203.0.113.3"}},
		{"IPv6", []corev1.IPFamily{corev1.IPv6Protocol}, []string{"fd00::1"}},
		{"dual stack", []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}, []string{"10.0.0.1", "10.0.0.2", "203.0.113.3", "fd00::1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilies: tc.families}}
			var got []string
			for _, i := range Ingress(svc, nodes) {
				got = append(got, i.IP)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ingress %v, want %v", got, tc.want)
			}
		})
	}
}
