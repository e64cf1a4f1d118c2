package dataplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// benchRoutes is the number of routes BenchmarkApply's Config holds,
// issue 62's target's.
const benchRoutes = 1000

// manyRoutesConfig is a Config of benchRoutes hosts on an HTTP port, each
// with a route for /api and one for /, as a server publishes routeCount
// HTTPRoutes.
func manyRoutesConfig(port int32, generation int64) *Config {
	p := Port{Port: port}
	for i := range benchRoutes {
		name := fmt.Sprintf("web-%d", i)
		p.Hosts = append(p.Hosts, Host{Hostname: name + ".example", Routes: []Route{
			{Name: name + " api", Match: prefix(fmt.Sprintf("/api/v%d", generation)), Backends: to(name)},
			{Name: name, Match: prefix("/"), Backends: to(name)},
		}})
	}
	return &Config{Version: Version, Generation: generation, Ports: []Port{p}}
}

// BenchmarkApply is a node's part of a route change with benchRoutes
// routes: the published Config decoded, compiled and swapped in on the
// port's socket; and the heap the compiled routes hold.
//
//	go test ./internal/components/gateway/dataplane -run '^$' -bench Apply -benchtime 200x
func BenchmarkApply(b *testing.B) {
	port := freePort(b)
	s := &servers{node: Node{Address: netip.MustParseAddr("127.0.0.1")}, endpoints: fixedEndpoints{}, transport: newTransport(), sockets: map[int32]*socket{}}
	defer s.closeAll()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var applies []time.Duration
	for i := 0; b.Loop(); i++ {
		data, err := Encode(manyRoutesConfig(port, int64(i)))
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		cfg, err := Decode(data)
		if err != nil {
			b.Fatal(err)
		}
		if !s.apply(ctx, cfg) {
			b.Fatal("the port does not listen")
		}
		applies = append(applies, time.Since(start))
	}
	slices.Sort(applies)
	b.ReportMetric(float64(applies[len(applies)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(applies[len(applies)*99/100].Microseconds())/1000, "p99-ms")

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cfg := manyRoutesConfig(port, 0)
	routes, _ := compile(&cfg.Ports[0])
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(routes)
	runtime.KeepAlive(cfg)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/benchRoutes, "heap-bytes/route")
}

// BenchmarkProxy sends the same requests through a node's port and
// straight to the backend, alternating, each round 4,000 requests from 16
// clients: HTTP/1.1 kept alive, a new connection each, and HTTPS kept
// alive (terminated by the port, or by the backend when straight); it
// reports each's requests/s and latencies and the port's ratio to
// straight. The client, the port and the backend share the machine.
//
//	go test ./internal/components/gateway/dataplane -run '^$' -bench Proxy -benchtime 3x
func BenchmarkProxy(b *testing.B) {
	kp, err := pki.NewSelfSigned(pki.ServingSpec{CommonName: "web.example", DNSNames: []string{"web.example"}})
	if err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(kp.Cert)
	pair, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		b.Fatal(err)
	}
	body := []byte("hello from the backend\n")
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) })
	backend := httptest.NewServer(echo)
	defer backend.Close()
	backendTLS := httptest.NewUnstartedServer(echo)
	backendTLS.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	backendTLS.StartTLS()
	defer backendTLS.Close()

	httpPort, httpsPort := freePort(b), freePort(b)
	s := &servers{node: Node{Address: netip.MustParseAddr("127.0.0.1")}, endpoints: fixedEndpoints{addr: backend.Listener.Addr().String()},
		transport: newTransport(), sockets: map[int32]*socket{}}
	defer s.closeAll()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	route := []Route{{Name: "web", Match: prefix("/"), Backends: to("web")}}
	if !s.apply(ctx, &Config{Ports: []Port{
		{Port: httpPort, Hosts: []Host{{Hostname: "web.example", Routes: route}}},
		{Port: httpsPort, TLS: true, Hosts: []Host{{Hostname: "web.example", Routes: route, Certificate: &Certificate{Cert: kp.CertPEM, Key: kp.KeyPEM}}}},
	}}) {
		b.Fatal("the ports do not listen")
	}
	gateway := func(port int32, scheme string) string {
		return scheme + "://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))) + "/"
	}
	for _, mode := range []struct {
		name              string
		keepAlive         bool
		tls               bool
		through, straight string
	}{
		{"keep-alive", true, false, gateway(httpPort, "http"), backend.URL + "/"},
		{"new-connections", false, false, gateway(httpPort, "http"), backend.URL + "/"},
		{"https", true, true, gateway(httpsPort, "https"), backendTLS.URL + "/"},
	} {
		b.Run(mode.name, func(b *testing.B) {
			transport := &http.Transport{DisableKeepAlives: !mode.keepAlive, MaxIdleConnsPerHost: 16,
				TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "web.example"}}
			defer transport.CloseIdleConnections()
			client := &http.Client{Transport: transport, Timeout: 10 * time.Second}
			var through, straight []load
			for b.Loop() {
				through = append(through, drive(b, client, mode.through))
				straight = append(straight, drive(b, client, mode.straight))
			}
			t, d := medianLoad(through), medianLoad(straight)
			b.ReportMetric(t.rate, "req/s")
			b.ReportMetric(ms(t.p50), "p50-ms")
			b.ReportMetric(ms(t.p99), "p99-ms")
			b.ReportMetric(d.rate, "straight-req/s")
			b.ReportMetric(ms(d.p99), "straight-p99-ms")
			b.ReportMetric(t.rate/d.rate, "ratio")
		})
	}
}

// load is one round's figures.
type load struct {
	rate     float64
	p50, p99 time.Duration
}

// drive sends 4,000 GETs with Host web.example from 16 clients.
func drive(b *testing.B, client *http.Client, url string) load {
	const clients, requests = 16, 4000
	latencies := make([]time.Duration, requests)
	var wg sync.WaitGroup
	var failed sync.Once
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < requests; i += clients {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Host = "web.example"
				t := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					failed.Do(func() { b.Errorf("%s: %v", url, err) })
					return
				}
				latencies[i] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(latencies)
	return load{rate: requests / elapsed.Seconds(), p50: latencies[requests/2], p99: latencies[requests*99/100]}
}

// medianLoad is the round of the median rate.
func medianLoad(rounds []load) load {
	slices.SortFunc(rounds, func(a, b load) int {
		switch {
		case a.rate < b.rate:
			return -1
		case a.rate > b.rate:
			return 1
		}
		return 0
	})
	return rounds[len(rounds)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
