package dataplane

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestSocketEntries: one port serves each Gateway's own address by its
// own routes, the node's other addresses by the nodes' entry, and closes
// a connection to an address of the Gateways' range that has no entry;
// a changed Config swaps an entry's routes on the same socket.
func TestSocketEntries(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("X-Backend"))
	}))
	defer backend.Close()
	port := freePort(t)

	tagged := func(address, name string) Port {
		p := Port{Port: port, Hosts: []Host{{Routes: []Route{{Name: name, Match: prefix("/"), Backends: to(name),
			Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
				RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "X-Backend", Value: name}}}}}}}}}}
		if address != "" {
			p.Address = netip.MustParseAddr(address)
		}
		return p
	}
	pool := &AddressRange{First: netip.MustParseAddr("127.0.0.2"), Last: netip.MustParseAddr("127.0.0.3")}
	s := &servers{endpoints: fixedEndpoints{addr: backend.Listener.Addr().String()}, transport: newTransport(), sockets: map[int32]*socket{}}
	defer s.closeAll()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if !s.apply(ctx, &Config{Pool: pool, Ports: []Port{tagged("", "nodes"), tagged("127.0.0.2", "gateway")}}) {
		t.Fatal("the port does not listen")
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(addr string) (string, error) {
		resp, err := client.Get("http://" + net.JoinHostPort(addr, strconv.Itoa(int(port))) + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	for addr, want := range map[string]string{"127.0.0.1": "nodes", "127.0.0.2": "gateway", "127.0.0.4": "nodes"} {
		if got, err := get(addr); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", addr, got, err, want)
		}
	}
	if got, err := get("127.0.0.3"); err == nil {
		t.Errorf("127.0.0.3, of the Gateways' range without an entry: served %q, want the connection closed", got)
	}

	sock := s.sockets[port]
	s.apply(ctx, &Config{Pool: pool, Ports: []Port{tagged("127.0.0.2", "changed")}})
	if s.sockets[port] != sock {
		t.Error("the socket was opened again for a change of its entries")
	}
	if got, err := get("127.0.0.2"); err != nil || got != "changed" {
		t.Errorf("127.0.0.2 after the change: %q, %v; want changed", got, err)
	}
	if got, err := get("127.0.0.1"); err == nil {
		t.Errorf("127.0.0.1 after the nodes' entry went: served %q, want the connection closed", got)
	}
	s.apply(ctx, &Config{})
	if _, err := get("127.0.0.2"); err == nil {
		t.Error("the port still serves with no entry left")
	}
}

// TestInFlightAcrossChange: a request in flight when its route is
// removed, and when its whole port goes, finishes with its backend's
// answer; the next one is not served.
func TestInFlightAcrossChange(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 2)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		io.WriteString(w, "finished")
	}))
	defer backend.Close()
	port := freePort(t)
	s := &servers{node: Node{Address: netip.MustParseAddr("127.0.0.1")}, endpoints: fixedEndpoints{addr: backend.Listener.Addr().String()},
		transport: newTransport(), sockets: map[int32]*socket{}}
	defer s.closeAll()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := &Config{Ports: []Port{{Port: port, Hosts: []Host{{Routes: []Route{{Name: "slow", Match: prefix("/"), Backends: to("slow")}}}}}}}
	s.apply(ctx, served)
	url := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))) + "/"
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	type answer struct {
		body string
		err  error
	}
	inFlight := func() chan answer {
		done := make(chan answer, 1)
		go func() {
			resp, err := client.Get(url)
			if err != nil {
				done <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			done <- answer{string(b), err}
		}()
		<-arrived
		return done
	}

	routeGone := inFlight()
	s.apply(ctx, &Config{Ports: []Port{{Port: port, Hosts: []Host{{}}}}})
	if resp, err := client.Get(url); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("a request after the route went: %v, %v; want 404", resp, err)
	}
	s.apply(ctx, served)
	portGone := inFlight()
	s.apply(ctx, &Config{})
	close(release)
	for what, done := range map[string]chan answer{"its route removed": routeGone, "its port closed": portGone} {
		if a := <-done; a.err != nil || a.body != "finished" {
			t.Errorf("a request in flight when %s: %q, %v; want the backend's answer", what, a.body, a.err)
		}
	}
}

// freePort is a port free on 127.0.0.1 now.
func freePort(tb testing.TB) int32 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return int32(l.Addr().(*net.TCPAddr).Port)
}
