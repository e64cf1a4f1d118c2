package dataplane

import (
	"math/rand/v2"
	"net"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// sliceEndpoints picks endpoints from EndpointSlices.
type sliceEndpoints struct {
	slices discoverylisters.EndpointSliceLister
}

// Pick implements Endpoints: a ready endpoint of the backend's port, at
// random.
func (e sliceEndpoints) Pick(b *Backend) (string, bool) {
	slices, err := e.slices.EndpointSlices(b.Namespace).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: b.Service}))
	if err != nil {
		return "", false
	}
	var ready []string
	for _, s := range slices {
		port, ok := slicePort(s, b)
		if !ok {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || len(ep.Addresses) == 0 {
				continue
			}
			ready = append(ready, net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port))))
		}
	}
	if len(ready) == 0 {
		return "", false
	}
	return ready[rand.IntN(len(ready))], true
}

// slicePort is the port of s that serves the backend's Service port: the
// one of its name (EndpointSlices name their ports by the Service's).
func slicePort(s *discoveryv1.EndpointSlice, b *Backend) (int32, bool) {
	for _, p := range s.Ports {
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		if name == b.PortName && p.Port != nil {
			return *p.Port, true
		}
	}
	return 0, false
}
