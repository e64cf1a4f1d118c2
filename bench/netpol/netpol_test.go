// Package netpol measures a node's NetworkPolicy enforcement at the scale
// issue 40 names: 1,000 Pods on the node (and as many on another) and 100
// policies, the enforcer (internal/components/networkpolicy) in this
// process on a `kubeboot server`'s API, its ruleset in this network
// namespace. Two of the node's Pods are real: network namespaces behind
// veth pairs, routed by this namespace as a node routes its Pods, so a
// packet between them crosses the node's forward hooks and the ruleset.
//
//	bench/netpol/run.sh                  (bench/internal/netns.sh netpol)
//
// BenchmarkPolicyChange: a policy's change to enforced, as a connection
// sees it. BenchmarkThroughput: bulk TCP between the two Pods with and
// without the policies. BenchmarkIdle: the enforcer's CPU and memory once
// synced.
package netpol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/internal/components/networkpolicy"
	"github.com/kubeboot/kubeboot/internal/components/networkpolicy/networkpolicytest"
	"github.com/kubeboot/kubeboot/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	node, otherNode = "bench-node", "other-node"
	pods, policies  = 1000, 100
	// The real Pods, in ns-0: the client and the server it connects to.
	clientIP, serverIP = "10.41.0.2", "10.41.0.3"
	// The server listens on both; the subject policy allows one.
	allowedPort, otherPort = 8080, 8081
)

// cluster is the benchmark's cluster: the API server, the enforcer, and
// the two real Pods.
type cluster struct {
	client   kubernetes.Interface
	clientNS string // the client Pod's network namespace
}

// start starts the API server, creates the objects and the policies, and
// makes the two real Pods; not the enforcer.
func start(b *testing.B) *cluster {
	b.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		b.Fatalf("nft (Debian's nftables) is needed: %v", err)
	}
	addr := harness.Addr(0)
	harness.RequireAddrs(b, addr)
	bin, err := harness.Binary()
	if err != nil {
		b.Fatal(err)
	}
	srv := harness.StartReadyServer(b, 2*time.Minute, bin, b.TempDir()+"/data",
		"--bind-address", addr, "--advertise-address", addr, "--secure-port", "6443", "--service-cluster-ip-range", "10.96.0.0/16")
	c := &cluster{client: srv.MustClient(b)}
	ctx := b.Context()
	createObjects(b, ctx, c.client)
	createPolicies(b, ctx, c.client)
	c.clientNS = podNetNS(b, "client", clientIP)
	serverNS := podNetNS(b, "server", serverIP)
	for _, port := range []int{allowedPort, otherPort} {
		serve(b, serverNS, port)
	}
	return c
}

// startEnforcer runs the enforcer until the benchmark ends, and waits for
// its first ruleset.
func (c *cluster) startEnforcer(b *testing.B) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e := networkpolicy.NewEnforcer(networkpolicy.Node{Name: node, Client: c.client})
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-e.Synced():
	case err := <-done:
		b.Fatalf("the enforcer stopped: %v", err)
	case <-time.After(2 * time.Minute):
		b.Fatal("the enforcer wrote no ruleset in 2 minutes")
	}
}

// createObjects creates networkpolicytest.Scale's namespaces, nodes and
// Pods (two of the node's the real ones) with their IPs, tolerating their
// nodes' missing heartbeats.
func createObjects(b *testing.B, ctx context.Context, client kubernetes.Interface) {
	b.Helper()
	scale := networkpolicytest.Scale(node, otherNode, pods, policies)
	for _, ns := range scale.Namespaces {
		if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for _, name := range []string{node, otherNode} {
		if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	// The real Pods take the places of the node's first two.
	all := slices.Clone(scale.Pods[2:])
	for _, p := range []struct{ name, ip string }{{"client", clientIP}, {"server", serverIP}} {
		all = append(all, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns-0", Name: p.name, Labels: map[string]string{"app": p.name}},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "none"}}},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: p.ip, PodIPs: []corev1.PodIP{{IP: p.ip}}},
		})
	}
	forever := []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	}
	parallel(b, len(all), func(i int) error {
		p := all[i].DeepCopy()
		p.Spec.Tolerations = forever
		created, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		created.Status = all[i].Status
		_, err = client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
}

// createPolicies creates networkpolicytest.Scale's policies, all but one,
// and the subject policy, which isolates the server and allows the client
// to allowedPort.
func createPolicies(b *testing.B, ctx context.Context, client kubernetes.Interface) {
	b.Helper()
	all := append([]*networkingv1.NetworkPolicy{subject(allowedPort)}, networkpolicytest.Scale(node, otherNode, 0, policies-1).Policies...)
	parallel(b, len(all), func(i int) error {
		_, err := client.NetworkingV1().NetworkPolicies(all[i].Namespace).Create(ctx, all[i], metav1.CreateOptions{})
		return err
	})
}

// subject isolates the server for ingress and allows the client to port.
func subject(port int32) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns-0", Name: "subject"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(port))}},
			}},
		},
	}
}

// parallel runs f for 0..n-1, 16 at a time, and fails b on an error.
func parallel(b *testing.B, n int, f func(int) error) {
	b.Helper()
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error { return f(i) })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

// podNetNS makes a Pod's network namespace named name, with ip on its
// end of a veth pair, routed to and from this namespace as a node routes
// its Pods, and returns its path.
func podNetNS(b *testing.B, name, ip string) string {
	b.Helper()
	// The namespace's name is a file of the host's /run/netns: one of
	// this process's own.
	host := "v" + name
	name = fmt.Sprintf("bench-%d-%s", os.Getpid(), name)
	for _, args := range [][]string{
		{"sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{"ip", "netns", "add", name},
		{"ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", name},
		{"ip", "-n", name, "link", "set", "lo", "up"},
		{"ip", "-n", name, "link", "set", "eth0", "up"},
		{"ip", "-n", name, "addr", "add", ip + "/32", "dev", "eth0"},
		{"ip", "-n", name, "route", "add", "default", "dev", "eth0"},
		{"ip", "link", "set", host, "up"},
		{"sysctl", "-qw", "net.ipv4.conf." + host + ".proxy_arp=1"},
		{"ip", "route", "add", ip + "/32", "dev", host},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			b.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	b.Cleanup(func() {
		// Both ends at once: a deleted namespace's own go later.
		_ = exec.Command("ip", "link", "delete", host).Run()
		_ = exec.Command("ip", "netns", "delete", name).Run()
	})
	return "/var/run/netns/" + name
}

// inNetNS runs f on a thread of its own in the network namespace at
// path: the sockets f opens are that namespace's.
func inNetNS(path string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, in another namespace, ends with
		// the goroutine.
		runtime.LockOSThread()
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", path, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// serve accepts connections on port in the namespace at path and reads
// each to its end.
func serve(b *testing.B, path string, port int) {
	b.Helper()
	var l net.Listener
	if err := inNetNS(path, func() (err error) {
		l, err = net.Listen("tcp", fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_, _ = io.Copy(io.Discard, conn)
			}()
		}
	}()
}

// dial connects from the namespace at path to addr, and reports whether
// it could: a port the policies deny is refused at once (the ruleset
// rejects); a timeout is not reaching it either.
func dial(path, addr string) (bool, error) {
	var ok bool
	err := inNetNS(path, func() error {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			ok = true
			return nil
		}
		var errno syscall.Errno
		var netErr net.Error
		if errors.As(err, &errno) && (errno == syscall.EHOSTUNREACH || errno == syscall.ECONNREFUSED || errno == syscall.EACCES) ||
			errors.As(err, &netErr) && netErr.Timeout() {
			return nil
		}
		return err
	})
	return ok, err
}

// waitDial waits until a connection from the client to the server's port
// succeeds or is refused, as want says, and returns how long it took.
func (c *cluster) waitDial(ctx context.Context, port int, want bool) (time.Duration, error) {
	start := time.Now()
	addr := net.JoinHostPort(serverIP, fmt.Sprint(port))
	err := wait.PollUntilContextTimeout(ctx, 2*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		ok, err := dial(c.clientNS, addr)
		return ok == want, err
	})
	return time.Since(start), err
}

// BenchmarkPolicyChange changes the subject policy to allow the other
// port instead, then back, each iteration: a change is enforced when a
// new connection to the port it denies is refused. It reports p50 and
// p99 of the time from the update's answer to that.
func BenchmarkPolicyChange(b *testing.B) {
	c := start(b)
	c.startEnforcer(b)
	ctx := b.Context()
	if _, err := c.waitDial(ctx, allowedPort, true); err != nil {
		b.Fatalf("the client does not reach the allowed port: %v", err)
	}
	if _, err := c.waitDial(ctx, otherPort, false); err != nil {
		b.Fatalf("the client reaches the other port: %v", err)
	}
	var lat []time.Duration
	ports := [2]int{allowedPort, otherPort}
	for i := 0; b.Loop(); i++ {
		allow, deny := ports[(i+1)%2], ports[i%2]
		p := subject(int32(allow))
		current, err := c.client.NetworkingV1().NetworkPolicies("ns-0").Get(ctx, "subject", metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		p.ResourceVersion = current.ResourceVersion
		if _, err := c.client.NetworkingV1().NetworkPolicies("ns-0").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		d, err := c.waitDial(ctx, deny, false)
		if err != nil {
			b.Fatalf("port %d still reached after the policy allows only %d: %v", deny, allow, err)
		}
		lat = append(lat, d)
		if _, err := c.waitDial(ctx, allow, true); err != nil {
			b.Fatalf("port %d not reached after the policy allows it: %v", allow, err)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99_ms")
}

// BenchmarkThroughput sends 64 KiB writes from the client to the server
// for a second each iteration, alternating between a node with the
// policies (the server isolated, the client allowed) and one without
// them, and reports each's MB/s.
func BenchmarkThroughput(b *testing.B) {
	c := start(b)
	c.startEnforcer(b)
	ctx := b.Context()
	mbps := map[bool][]float64{}
	for i := 0; b.Loop(); i++ {
		with := i%2 == 0
		c.setPolicies(b, ctx, with)
		n, elapsed := c.send(b, time.Second)
		mbps[with] = append(mbps[with], float64(n)/1e6/elapsed.Seconds())
	}
	median := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(median(mbps[true]), "MB/s_policies")
	b.ReportMetric(median(mbps[false]), "MB/s_none")
}

// setPolicies creates or deletes the policies, and waits until the
// server's other port is refused (the server isolated) or reached.
func (c *cluster) setPolicies(b *testing.B, ctx context.Context, with bool) {
	b.Helper()
	list, err := c.client.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if with && len(list.Items) == 0 {
		createPolicies(b, ctx, c.client)
	}
	if !with {
		parallel(b, len(list.Items), func(i int) error {
			return c.client.NetworkingV1().NetworkPolicies(list.Items[i].Namespace).Delete(ctx, list.Items[i].Name, metav1.DeleteOptions{})
		})
	}
	if _, err := c.waitDial(ctx, otherPort, !with); err != nil {
		b.Fatal(err)
	}
}

// send writes to the server's allowed port for d, and returns the bytes
// written and the time it took.
func (c *cluster) send(b *testing.B, d time.Duration) (int64, time.Duration) {
	b.Helper()
	var conn net.Conn
	if err := inNetNS(c.clientNS, func() (err error) {
		conn, err = net.Dial("tcp", net.JoinHostPort(serverIP, fmt.Sprint(allowedPort)))
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 64<<10)
	var n int64
	start := time.Now()
	for time.Since(start) < d {
		w, err := conn.Write(buf)
		if err != nil {
			b.Fatal(err)
		}
		n += int64(w)
	}
	return n, time.Since(start)
}

// BenchmarkIdle measures what the synced enforcer costs a node at rest:
// this process's resident memory before and after it starts (its
// informers' copies of the Pods, Namespaces and policies), and the CPU it
// and its nft processes use over each minute, its resync check included.
func BenchmarkIdle(b *testing.B) {
	c := start(b)
	before := rss(b)
	c.startEnforcer(b)
	// The nodes have no kubelet: 40 s after they appear, the node
	// lifecycle controller marks them and their Pods not ready, once
	// (2,000 Pod updates for the informers). The measure starts after.
	time.Sleep(time.Minute)
	var cpu time.Duration
	var elapsed time.Duration
	for b.Loop() {
		u0 := cpuTime(b)
		start := time.Now()
		time.Sleep(networkpolicy.DefaultResyncInterval)
		cpu += cpuTime(b) - u0
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(rss(b)-before)/(1<<20), "rss_added_MiB")
	b.ReportMetric(float64(cpu.Milliseconds())/elapsed.Seconds(), "cpu_ms/s")
}

// rss is this process's resident memory after a collection.
func rss(b *testing.B) int64 {
	b.Helper()
	runtime.GC()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscan(rest, &kb); err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// cpuTime is the CPU this process and its finished children have used.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var total time.Duration
	for _, who := range []int{unix.RUSAGE_SELF, unix.RUSAGE_CHILDREN} {
		var ru unix.Rusage
		if err := unix.Getrusage(who, &ru); err != nil {
			b.Fatal(err)
		}
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return total
}
