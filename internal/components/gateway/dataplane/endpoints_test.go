package dataplane

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// TestSliceEndpoints: a backend's endpoints are its own Service's ready
// ones, at the port of its port's name, spread over every slice.
func TestSliceEndpoints(t *testing.T) {
	slice := func(ns, name, service, port string, number int32, ready map[string]bool) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To(port), Port: ptr.To(number)}}}
		for addr, r := range ready {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r)}})
		}
		return s
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, serviceIndexers())
	for _, s := range []*discoveryv1.EndpointSlice{
		slice("app", "web-1", "web", "http", 8080, map[string]bool{"10.42.0.1": true, "10.42.0.2": false}),
		slice("app", "web-2", "web", "http", 8080, map[string]bool{"10.42.1.1": true}),
		slice("app", "web-metrics", "web", "metrics", 9090, map[string]bool{"10.42.0.1": true}),
		slice("app", "other", "other", "http", 8080, map[string]bool{"10.42.9.9": true}),
		slice("prod", "web", "web", "http", 8080, map[string]bool{"10.43.0.1": true}),
	} {
		if err := idx.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	e := sliceEndpoints{idx}
	seen := map[string]int{}
	for range 200 {
		addr, ok := e.Pick(&Backend{Namespace: "app", Service: "web", PortName: "http"})
		if !ok {
			t.Fatal("no endpoint")
		}
		seen[addr]++
	}
	if len(seen) != 2 || seen["10.42.0.1:8080"] == 0 || seen["10.42.1.1:8080"] == 0 {
		t.Errorf("picked %v, want both ready endpoints of app/web's port http, and only those", seen)
	}
	if addr, ok := e.Pick(&Backend{Namespace: "app", Service: "missing", PortName: "http"}); ok {
		t.Errorf("a Service without slices: picked %s", addr)
	}
	if addr, ok := e.Pick(&Backend{Namespace: "app", Service: "web", PortName: "grpc"}); ok {
		t.Errorf("a port no slice has: picked %s", addr)
	}
}
