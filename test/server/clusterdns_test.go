package server

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestClusterDNS runs `kubeboot server --simulated-nodes=1` in a private
// network namespace and asks its cluster DNS what a Pod would, as the
// Kubernetes DNS specification says it answers: a Service's ClusterIP,
// a headless Service's endpoints, SRV records of named ports, Pod A
// records, NXDOMAIN for names that do not exist, and other names through
// the upstream (a fake one here: nothing leaves the namespace). The
// kube-dns Service is at the Service range's tenth address, and its
// EndpointSlice names where the server serves.
func TestClusterDNS(t *testing.T) {
	addr, ok := inProxyNetNS(t)
	if !ok {
		return
	}
	upstream := fakeUpstream(t, net.JoinHostPort(addr, "5353"), "example.org.", "192.0.2.99")
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	srv := harness.StartReadyServer(t, 2*time.Minute, bin, filepath.Join(t.TempDir(), "data"),
		"--bind-address", addr, "--advertise-address", addr, "--secure-port", "6443", "--service-cluster-ip-range", "10.96.0.0/16",
		"--simulated-nodes=1", "--cluster-dns-upstream", upstream)
	client := srv.MustClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Where the kube-dns Service leads: this server's address and port,
	// for UDP and for TCP (dig +tcp, and resolvers whose answer did not fit
	// in a datagram).
	servers := map[string]string{}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kube-dns"})
		if err != nil || len(list.Items) != 1 || len(list.Items[0].Endpoints) != 1 || len(list.Items[0].Ports) == 0 {
			return false, nil
		}
		s := list.Items[0]
		if !slices.Equal(s.Endpoints[0].Addresses, []string{addr}) {
			return false, fmt.Errorf("kube-dns endpoints %v, want this server's %s", s.Endpoints[0].Addresses, addr)
		}
		for _, p := range s.Ports {
			servers[strings.ToLower(string(*p.Protocol))] = net.JoinHostPort(addr, strconv.Itoa(int(*p.Port)))
		}
		return len(servers) == 2, nil
	})
	if err != nil {
		t.Fatalf("no kube-dns EndpointSlice naming the server: %v", err)
	}
	svc, err := client.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP != "10.96.0.10" {
		t.Fatalf("kube-dns Service: %v, ClusterIP %v; want 10.96.0.10", err, svc)
	}

	web, err := client.CoreV1().Services(metav1.NamespaceDefault).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services(metav1.NamespaceDefault).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "sql", Port: 5432, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "db-1", Labels: map[string]string{discoveryv1.LabelServiceName: "db", discoveryv1.LabelManagedBy: "test"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.1.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.1.0.6"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("sql"), Port: ptr.To[int32](5432), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name  string
		qtype uint16
		rcode int
		want  []string
	}{
		{"kubernetes.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.96.0.1"}},
		{"web.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{web.Spec.ClusterIP}},
		{"_http._tcp.web.default.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess, []string{"80 web.default.svc.cluster.local."}},
		{"db.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.1.0.5", "10.1.0.6"}},
		{"10-1-2-3.default.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.1.2.3"}},
		{"missing.default.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"example.org.", dns.TypeA, dns.RcodeSuccess, []string{"192.0.2.99"}},
	} {
		for _, network := range []string{"udp", "tcp"} {
			t.Run(network+" "+tc.name, func(t *testing.T) {
				var rcode int
				var got []string
				err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
					rcode, got = query(network, servers[network], tc.name, tc.qtype)
					return rcode == tc.rcode && slices.Equal(got, tc.want), nil
				})
				if err != nil {
					t.Errorf("%s %s over %s at %s: rcode %s, answers %v; want %s, %v", dns.TypeToString[tc.qtype], tc.name, network, servers[network],
						dns.RcodeToString[rcode], got, dns.RcodeToString[tc.rcode], tc.want)
				}
			})
		}
	}
}

// query asks server for name's records of qtype over network (udp,
// tcp), and returns the response code and the answers, sorted: A records
// as addresses, SRV records as "port target".
func query(network, server, name string, qtype uint16) (int, []string) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	r, _, err := (&dns.Client{Net: network}).Exchange(m, server)
	if err != nil {
		return -1, []string{err.Error()}
	}
	var got []string
	for _, rr := range r.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			got = append(got, rr.A.String())
		case *dns.SRV:
			got = append(got, fmt.Sprintf("%d %s", rr.Port, rr.Target))
		}
	}
	slices.Sort(got)
	return r.Rcode, got
}

// fakeUpstream answers A queries for name with ip on address, over UDP,
// and NXDOMAIN for anything else, until the test ends; it returns the
// address.
func fakeUpstream(t *testing.T, address, name, ip string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", address)
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		if q := req.Question[0]; q.Name == name && q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)})
		} else {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return address
}
