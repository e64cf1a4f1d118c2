package validation

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeboot/kubeboot/internal/api/defaults"
)

// kubernetesEndpointSlice is the EndpointSlice of the kubernetes Service.
func kubernetesEndpointSlice(mutate func(*discoveryv1.EndpointSlice)) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default", ResourceVersion: "1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"192.168.1.10"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("https"), Port: ptr(int32(6443)), Protocol: ptr(corev1.ProtocolTCP)}},
	}
	if mutate != nil {
		mutate(s)
	}
	defaults.EndpointSlice(s)
	return s
}

func TestValidateEndpointSlice(t *testing.T) {
	manyPorts := make([]discoveryv1.EndpointPort, maxSlicePorts+1)
	for i := range manyPorts {
		manyPorts[i] = discoveryv1.EndpointPort{Name: ptr(fmt.Sprintf("p%d", i))}
	}
	tests := []struct {
		name  string
		slice *discoveryv1.EndpointSlice
		want  []string
	}{
		{name: "kubernetes endpoint slice", slice: kubernetesEndpointSlice(nil)},
		{name: "IPv6 with node, hostname and hints", slice: kubernetesEndpointSlice(func(s *discoveryv1.EndpointSlice) {
			s.AddressType = discoveryv1.AddressTypeIPv6
			s.Endpoints[0].Addresses = []string{"fd00::10"}
			s.Endpoints[0].NodeName, s.Endpoints[0].Hostname = ptr("node-1"), ptr("web-0")
			s.Endpoints[0].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}, ForNodes: []discoveryv1.ForNode{{Name: "node-1"}}}
		})},
		{name: "FQDN", slice: kubernetesEndpointSlice(func(s *discoveryv1.EndpointSlice) {
			s.AddressType, s.Endpoints[0].Addresses = discoveryv1.AddressTypeFQDN, []string{"db.example.com"}
		})},
		{name: "no endpoints and no ports", slice: kubernetesEndpointSlice(func(s *discoveryv1.EndpointSlice) { s.Endpoints, s.Ports = nil, nil })},
		{name: "unnamed single port", slice: kubernetesEndpointSlice(func(s *discoveryv1.EndpointSlice) { s.Ports[0].Name = nil })},
		{name: "missing address type", slice: kubernetesEndpointSlice(func(s *discoveryv1.EndpointSlice) { s.AddressType = "" }),
			want: []string{`addressType: Required value`}},
		{name: "unknown address type", slice: kubernetesEndpointSlice(func(s *discoveryv1.EndpointSlice) { s.AddressType = "IP" }),
			want: []string{`addressType: Unsupported value: "IP": supported values: "FQDN", "IPv4", "IPv6"`}},
		{name: "addresses of the wrong kind", slice: kubernetesEndpointSlice(func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"fd00::1", "10.0.0.300", "169.254.1.1"}}, {}}
		}), want: []string{
			`endpoints[0].addresses[0]: Invalid value: "fd00::1": must be an IPv4 address`,
			`endpoints[0].addresses[1]: Invalid value: "10.0.0.300": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`,
			`endpoints[0].addresses[2]: Invalid value: "169.254.1.1": may not be in the link-local range (169.254.0.0/16, fe80::/10)`,
			`endpoints[1].addresses: Required value: must contain at least 1 address`,
		}},
		{name: "bad endpoint fields", slice: kubernetesEndpointSlice(func(s *discoveryv1.EndpointSlice) {
			s.Endpoints[0].Hostname, s.Endpoints[0].NodeName = ptr("web.0"), ptr("Node")
			s.Endpoints[0].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "a"}, {Name: "a"}}}
		}), want: []string{
			`endpoints[0].nodeName: Invalid value: "Node": ` + dns1123SubdomainMsg,
			`endpoints[0].hostname: Invalid value: "web.0": must not contain dots`,
			`endpoints[0].hints.forZones[1].name: Duplicate value: "a"`,
		}},
		{name: "too many endpoints", slice: kubernetesEndpointSlice(func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = make([]discoveryv1.Endpoint, maxSliceEndpoints+1)
		}), want: []string{`endpoints: Too many: 1001: must have at most 1000 items`}},
		{name: "too many addresses", slice: kubernetesEndpointSlice(func(s *discoveryv1.EndpointSlice) {
			s.Endpoints[0].Addresses = slices.Repeat([]string{"10.0.0.1"}, maxSliceAddresses+1)
		}), want: []string{`endpoints[0].addresses: Too many: 101: must have at most 100 items`}},
		{name: "too many ports", slice: kubernetesEndpointSlice(func(s *discoveryv1.EndpointSlice) { s.Ports = manyPorts }),
			want: []string{`ports: Too many: 20001: must have at most 20000 items`}},
		{name: "bad ports", slice: kubernetesEndpointSlice(func(s *discoveryv1.EndpointSlice) {
			s.Ports = []discoveryv1.EndpointPort{
				{Name: ptr("https")}, {Name: ptr("https")}, {Name: ptr("HTTP"), Protocol: ptr(corev1.Protocol("ICMP"))}, {AppProtocol: ptr("bad/app/proto")},
			}
		}), want: []string{
			`ports[1].name: Duplicate value: "https"`,
			`ports[2].name: Invalid value: "HTTP": ` + dns1123LabelMsg,
			`ports[2].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"`,
			`ports[3].appProtocol: Invalid value: "bad/app/proto": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateEndpointSlice(tc.slice), tc.want)
		})
	}
}

func TestValidateEndpointSliceUpdate(t *testing.T) {
	tests := []struct {
		name   string
		old    func(*discoveryv1.EndpointSlice)
		mutate func(*discoveryv1.EndpointSlice)
		want   []string
	}{
		{name: "endpoint becomes not ready", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Conditions.Ready = ptr(false) }},
		{name: "address type is fixed", mutate: func(s *discoveryv1.EndpointSlice) {
			s.AddressType, s.Endpoints[0].Addresses = discoveryv1.AddressTypeIPv6, []string{"fd00::10"}
		}, want: []string{`addressType: Invalid value: "IPv6": field is immutable`}},
		{name: "stored endpoints are not re-checked", old: func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = []string{"192.168.001.010"} },
			mutate: func(s *discoveryv1.EndpointSlice) { s.Labels["touched"] = "true" }},
		{name: "changed endpoints are checked", mutate: func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = []string{"192.168.001.010"} },
			want: []string{`endpoints[0].addresses[0]: Invalid value: "192.168.001.010": must not have leading 0s`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := kubernetesEndpointSlice(tc.old)
			s := old.DeepCopy()
			tc.mutate(s)
			checkErrors(t, ValidateEndpointSliceUpdate(s, old), tc.want)
		})
	}
}
