package printers

import (
	"strconv"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EndpointSlices returns the Table for discovery.k8s.io/v1 endpoint slices
// (*discoveryv1.EndpointSlice and *discoveryv1.EndpointSliceList): Name,
// AddressType, Ports, Endpoints and Age.
func EndpointSlices() *Table {
	doc := discoveryv1.EndpointSlice{}.SwaggerDoc()
	return newTable("endpointslices", []metav1.TableColumnDefinition{
		nameColumn(),
		column("AddressType", doc["addressType"]),
		column("Ports", doc["ports"]),
		column("Endpoints", doc["endpoints"]),
		ageColumn(),
	}, func(s *discoveryv1.EndpointSlice, now time.Time) []interface{} {
		return []interface{}{
			s.Name,
			string(s.AddressType),
			sliceCell(slicePorts(s.Ports)),
			sliceCell(sliceAddresses(s.Endpoints)),
			age(s.CreationTimestamp, now),
		}
	})
}

// slicePorts names each port by number, else by name, else "*".
func slicePorts(ports []discoveryv1.EndpointPort) []string {
	out := make([]string, 0, len(ports))
	for _, p := range ports {
		switch {
		case p.Port != nil:
			out = append(out, strconv.Itoa(int(*p.Port)))
		case p.Name != nil:
			out = append(out, *p.Name)
		default:
			out = append(out, "*")
		}
	}
	return out
}

// sliceAddresses returns every endpoint address. Like kube-apiserver, it does
// not filter on the ready condition.
func sliceAddresses(endpoints []discoveryv1.Endpoint) []string {
	var out []string
	for _, ep := range endpoints {
		out = append(out, ep.Addresses...)
	}
	return out
}

// sliceCell shows at most maxListed values, or "<unset>" when there are none.
func sliceCell(values []string) string {
	if len(values) == 0 {
		return "<unset>"
	}
	return joinWithMore(values, len(values), maxListed)
}
