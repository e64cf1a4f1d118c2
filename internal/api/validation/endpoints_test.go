package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeboot/kubeboot/internal/api/defaults"
)

// kubernetesEndpoints are the Endpoints of the kubernetes Service: the
// apiserver's address and its https port.
func kubernetesEndpoints(mutate func(*corev1.Endpoints)) *corev1.Endpoints {
	e := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default", ResourceVersion: "1",
			Labels: map[string]string{"endpointslice.kubernetes.io/skip-mirror": "true"}},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "192.168.1.10"}},
			Ports:     []corev1.EndpointPort{{Name: "https", Port: 6443, Protocol: corev1.ProtocolTCP}},
		}},
	}
	if mutate != nil {
		mutate(e)
	}
	defaults.Endpoints(e)
	return e
}

func TestValidateEndpoints(t *testing.T) {
	tests := []struct {
		name string
		e    *corev1.Endpoints
		want []string
	}{
		{name: "kubernetes endpoints", e: kubernetesEndpoints(nil)},
		{name: "no subsets", e: kubernetesEndpoints(func(e *corev1.Endpoints) { e.Subsets = nil })},
		{name: "not-ready address, node name, hostname, no ports", e: kubernetesEndpoints(func(e *corev1.Endpoints) {
			e.Subsets = []corev1.EndpointSubset{{NotReadyAddresses: []corev1.EndpointAddress{
				{IP: "fd00::10", Hostname: "web-0", NodeName: ptr("node-1.example.com")},
			}}}
		})},
		{name: "subset without addresses", e: kubernetesEndpoints(func(e *corev1.Endpoints) { e.Subsets[0].Addresses = nil }),
			want: []string{"subsets[0]: Required value: must specify `addresses` or `notReadyAddresses`"}},
		{name: "bad addresses", e: kubernetesEndpoints(func(e *corev1.Endpoints) {
			e.Subsets[0].Addresses = []corev1.EndpointAddress{{IP: "not-an-ip"}, {IP: "127.0.0.1"}, {IP: "10.0.0.1", Hostname: "Web", NodeName: ptr("Node_1")}}
		}), want: []string{
			`subsets[0].addresses[0].ip: Invalid value: "not-an-ip": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`,
			`subsets[0].addresses[1].ip: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`,
			`subsets[0].addresses[2].hostname: Invalid value: "Web": ` + dns1123LabelMsg,
			`subsets[0].addresses[2].nodeName: Invalid value: "Node_1": ` + dns1123SubdomainMsg,
		}},
		{name: "bad ports", e: kubernetesEndpoints(func(e *corev1.Endpoints) {
			e.Subsets[0].Ports = []corev1.EndpointPort{{Name: "https", Port: 0, Protocol: "ICMP"}, {Port: 80, Protocol: corev1.ProtocolTCP}}
		}), want: []string{
			`subsets[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive`,
			`subsets[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"`,
			`subsets[0].ports[1].name: Required value`,
		}},
		{name: "name may be a subdomain", e: kubernetesEndpoints(func(e *corev1.Endpoints) { e.Name = "web.v2" })},
		{name: "invalid name", e: kubernetesEndpoints(func(e *corev1.Endpoints) { e.Name = "Web" }),
			want: []string{`metadata.name: Invalid value: "Web": ` + dns1123SubdomainMsg}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateEndpoints(tc.e), tc.want)
		})
	}
}

func TestValidateEndpointsUpdate(t *testing.T) {
	tests := []struct {
		name   string
		old    func(*corev1.Endpoints)
		mutate func(*corev1.Endpoints)
		want   []string
	}{
		{name: "address moves to another node", old: func(e *corev1.Endpoints) { e.Subsets[0].Addresses[0].NodeName = ptr("node-a") },
			mutate: func(e *corev1.Endpoints) { e.Subsets[0].Addresses[0].NodeName = ptr("node-b") }},
		{name: "stored non-strict IP is kept", old: func(e *corev1.Endpoints) { e.Subsets[0].Addresses[0].IP = "192.168.001.010" },
			mutate: func(e *corev1.Endpoints) { e.Labels["touched"] = "true" }},
		{name: "new non-strict IP is rejected", mutate: func(e *corev1.Endpoints) { e.Subsets[0].Addresses[0].IP = "192.168.001.011" },
			want: []string{`subsets[0].addresses[0].ip: Invalid value: "192.168.001.011": must not have leading 0s`}},
		{name: "rename", mutate: func(e *corev1.Endpoints) { e.Name = "other" },
			want: []string{`metadata.name: Invalid value: "other": field is immutable`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := kubernetesEndpoints(tc.old)
			e := old.DeepCopy()
			tc.mutate(e)
			checkErrors(t, ValidateEndpointsUpdate(e, old), tc.want)
		})
	}
}
