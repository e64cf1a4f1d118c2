package gateway

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeboot/kubeboot/internal/components/gateway/dataplane"
)

// routeCount is the number of HTTPRoutes the benchmarks hold, issue 62's
// target's.
const routeCount = 1000

// manyRoutes is a cluster of one Gateway with an HTTP and an HTTPS
// listener taking routes of every namespace, and routeCount HTTPRoutes,
// each its own hostname and Service.
func manyRoutes(b *testing.B) *snapshot {
	s := baseSnapshot()
	https := httpListener("https", 443, gatewayv1.NamespacesFromAll, "")
	https.Protocol = gatewayv1.HTTPSProtocolType
	cert, key := selfSigned(b, "*.example")
	s.secrets[types.NamespacedName{Namespace: "app", Name: "tls"}] = &corev1.Secret{Data: map[string][]byte{"tls.crt": cert, "tls.key": key}}
	https.TLS = &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "tls"}}}
	s.gateways = []*gatewayv1.Gateway{gw("app", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromAll, ""), https)}
	for i := range routeCount {
		name := fmt.Sprintf("web-%d", i)
		s.services[types.NamespacedName{Namespace: "app", Name: name}] = service("app", name, 8080)
		s.routes = append(s.routes, httpRoute("app", name, i, parent("app", "g"), []string{name + ".example"},
			ruleTo(name, 8080, pathPrefix("/")), ruleTo(name, 8080, pathPrefix("/api"))))
	}
	return s
}

// BenchmarkRouteChange is the server's pass when one of routeCount
// HTTPRoutes changes: the model of every object, and the nodes' Config
// encoded as the Secret holds it. The nodes' part is dataplane's
// BenchmarkApply.
//
//	go test ./internal/components/gateway -run '^$' -bench RouteChange -benchtime 200x
func BenchmarkRouteChange(b *testing.B) {
	s := manyRoutes(b)
	var passes []time.Duration
	var size int
	for i := 0; b.Loop(); i++ {
		r := s.routes[i%routeCount].DeepCopy()
		r.Generation++
		r.Spec.Rules[1].Matches[0].Path.Value = ptr.To(fmt.Sprintf("/api/v%d", i))
		s.routes[i%routeCount] = r
		start := time.Now()
		m := build(s)
		data, err := dataplane.Encode(m.config(int64(i)))
		if err != nil {
			b.Fatal(err)
		}
		passes = append(passes, time.Since(start))
		size = len(data)
	}
	slices.Sort(passes)
	b.ReportMetric(float64(passes[len(passes)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(passes[len(passes)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(size), "config-bytes")
	b.ReportMetric(float64(size)/routeCount, "config-bytes/route")
}

// BenchmarkReadCRDs is what every start of a server spends reading the
// embedded CRDs of the served kinds (~1 MB of YAML).
//
//	go test ./internal/components/gateway -run '^$' -bench ReadCRDs -benchmem
func BenchmarkReadCRDs(b *testing.B) {
	for b.Loop() {
		c := &Component{}
		if err := c.readCRDs(); err != nil {
			b.Fatal(err)
		}
	}
}
