// Package dns measures the cluster DNS of `kubeboot server`: queries a
// second and their latency, asked straight at the server's DNS port (as
// kube-proxy leads a Pod's queries there) from 16 clients at once.
package dns

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeboot/kubeboot/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	clients  = 16
	queries  = 20000 // per iteration
	question = "kubernetes.default.svc.cluster.local."
)

// BenchmarkClusterDNS asks for the kubernetes Service's A record, each
// iteration `queries` times over UDP, and reports queries/s, p50 and p99.
func BenchmarkClusterDNS(b *testing.B) {
	addr := harness.Addr(0)
	harness.RequireAddrs(b, addr)
	bin, err := harness.Binary()
	if err != nil {
		b.Fatal(err)
	}
	srv := harness.StartReadyServer(b, 2*time.Minute, bin, filepath.Join(b.TempDir(), "data"),
		"--bind-address", addr, "--advertise-address", addr, "--secure-port", "6443", "--service-cluster-ip-range", "10.96.0.0/16")
	client := srv.MustClient(b)
	var server string
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kube-dns"})
		if err != nil || len(list.Items) == 0 || len(list.Items[0].Ports) == 0 {
			return false, nil
		}
		server = net.JoinHostPort(addr, strconv.Itoa(int(*list.Items[0].Ports[0].Port)))
		_, err = ask(new(dns.Client), server)
		return err == nil, nil
	})
	if err != nil {
		b.Fatalf("cluster DNS not answering: %v", err)
	}
	var all []time.Duration
	var elapsed time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		latencies := make([][]time.Duration, clients)
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		start := time.Now()
		for c := range clients {
			wg.Go(func() {
				dc := new(dns.Client)
				for range queries / clients {
					d, err := ask(dc, server)
					if err != nil {
						errs <- err
						return
					}
					latencies[c] = append(latencies[c], d)
				}
			})
		}
		wg.Wait()
		elapsed += time.Since(start)
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		for _, l := range latencies {
			all = append(all, l...)
		}
	}
	b.StopTimer()
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "queries/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}

// ask asks server for question's A record and times the answer.
func ask(c *dns.Client, server string) (time.Duration, error) {
	m := new(dns.Msg)
	m.SetQuestion(question, dns.TypeA)
	start := time.Now()
	r, _, err := c.Exchange(m, server)
	if err != nil {
		return 0, err
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		return 0, fmt.Errorf("%s: rcode %s, %d answers", question, dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	return time.Since(start), nil
}
