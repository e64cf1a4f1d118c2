package dataplane

import (
	"math/rand/v2"
	"net"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// byService indexes EndpointSlices by their Service's namespace/name, so
// that a request finds its backend's without a scan of the namespace.
const byService = "service"

// serviceIndexers are the EndpointSlice informer's indexers (made when
// asked: a package-level map would be made at every start of the binary).
func serviceIndexers() cache.Indexers {
	return cache.Indexers{byService: func(obj any) ([]string, error) {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok || s.Labels[discoveryv1.LabelServiceName] == "" {
			return nil, nil
		}
		return []string{s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]}, nil
	}}
}

// sliceEndpoints picks endpoints from EndpointSlices, indexed by
// serviceIndexers.
type sliceEndpoints struct {
	slices cache.Indexer
}

// Pick implements Endpoints: a ready endpoint of the backend's port, at
// random.
func (e sliceEndpoints) Pick(b *Backend) (string, bool) {
	objs, err := e.slices.ByIndex(byService, b.Namespace+"/"+b.Service)
	if err != nil {
		return "", false
	}
	// One pass, choosing each of the n ready endpoints seen with
	// chance 1/n (reservoir sampling): no list per request.
	var addr string
	var port int32
	n := 0
	for _, obj := range objs {
		s := obj.(*discoveryv1.EndpointSlice)
		p, ok := slicePort(s, b)
		if !ok {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || len(ep.Addresses) == 0 {
				continue
			}
			if n++; rand.IntN(n) == 0 {
				addr, port = ep.Addresses[0], p
			}
		}
	}
	if n == 0 {
		return "", false
	}
	return net.JoinHostPort(addr, strconv.Itoa(int(port))), true
}

// Ready implements Endpoints.
func (e sliceEndpoints) Ready(b *Backend, endpoint string) bool {
	host, portText, err := net.SplitHostPort(endpoint)
	if err != nil {
		return false
	}
	port, err := strconv.ParseInt(portText, 10, 32)
	if err != nil {
		return false
	}
	objs, err := e.slices.ByIndex(byService, b.Namespace+"/"+b.Service)
	if err != nil {
		return false
	}
	for _, obj := range objs {
		s := obj.(*discoveryv1.EndpointSlice)
		if p, ok := slicePort(s, b); !ok || p != int32(port) {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || len(ep.Addresses) == 0 {
				continue
			}
			if ep.Addresses[0] == host {
				return true
			}
		}
	}
	return false
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
