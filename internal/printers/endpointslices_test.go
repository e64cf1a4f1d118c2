package printers

import (
	"reflect"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEndpointSliceCells(t *testing.T) {
	port := func(num int32) discoveryv1.EndpointPort { return discoveryv1.EndpointPort{Port: ptrTo(num)} }
	endpoint := func(ready bool, addrs ...string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(ready)}}
	}
	tests := []struct {
		name      string
		ports     []discoveryv1.EndpointPort
		endpoints []discoveryv1.Endpoint
		wantPorts string
		wantEps   string
	}{{
		name:      "empty",
		wantPorts: "<unset>",
		wantEps:   "<unset>",
	}, {
		name:      "one of each",
		ports:     []discoveryv1.EndpointPort{port(16443)},
		endpoints: []discoveryv1.Endpoint{endpoint(true, "198.51.100.10")},
		wantPorts: "16443",
		wantEps:   "198.51.100.10",
	}, {
		name: "port without number uses its name, without either is *",
		ports: []discoveryv1.EndpointPort{
			{Name: ptrTo("http")}, {}, port(443),
		},
		wantPorts: "http,*,443",
		wantEps:   "<unset>",
	}, {
		name:      "ports truncated after three",
		ports:     []discoveryv1.EndpointPort{port(1), port(2), port(3), port(4), port(5)},
		wantPorts: "1,2,3 + 2 more...",
		wantEps:   "<unset>",
	}, {
		name: "endpoints truncated after three, addresses of all endpoints counted",
		endpoints: []discoveryv1.Endpoint{
			endpoint(true, "10.0.0.1", "10.0.0.2"), endpoint(false, "10.0.0.3"), endpoint(true, "10.0.0.4"),
		},
		wantPorts: "<unset>",
		wantEps:   "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...",
	}, {
		name:      "not-ready endpoints are listed like kube-apiserver does",
		endpoints: []discoveryv1.Endpoint{endpoint(false, "10.0.0.9")},
		wantPorts: "<unset>",
		wantEps:   "10.0.0.9",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			slice := &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: "web-abc", CreationTimestamp: ago(5 * s)},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       tc.ports,
				Endpoints:   tc.endpoints,
			}
			want := []interface{}{"web-abc", "IPv4", tc.wantPorts, tc.wantEps, "5s"}
			if got := cells(t, EndpointSlices(), slice); !reflect.DeepEqual(got, want) {
				t.Errorf("cells\n got %q\nwant %q", got, want)
			}
		})
	}
}
