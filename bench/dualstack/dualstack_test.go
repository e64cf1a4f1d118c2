// Package dualstack measures, on one dual-stack `kubeboot server --node`
// (198.51.100.1 and 2001:db8::1, Pods and Services of both families), how
// soon the host reaches a new Pod and a new Service over IPv4 against over
// IPv6: the same Pods and Services, each family timed from the same
// create. run.sh makes the namespace.
package dualstack

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	addr6 = "2001:db8::1"
	// pollInterval is how often a new connection is tried, each on its
	// own: a SYN to an address not yet programmed waits for its
	// retransmission, which would hide when the next one could pass.
	pollInterval = 10 * time.Millisecond
)

// serviceRanges are the server's Service ranges, routed to lo so that the
// host's connections to a ClusterIP reach kube-proxy's rules.
var serviceRanges = []string{"10.96.0.0/16", "fd00:96::/112"}

// startServer starts the dual-stack server and waits for its node.
func startServer(b *testing.B) (kubernetes.Interface, string) {
	harness.RequireAddrs(b, addr6)
	srv := harness.StartNodeServer(b, "--node-ip="+harness.Addr(0)+","+addr6,
		"--service-cluster-ip-range="+strings.Join(serviceRanges, ","), "--cluster-cidr=10.42.0.0/16,fd00:42::/56",
		"--kubelet-arg=--max-pods=250")
	harness.RouteOut(b, "lo", serviceRanges)
	client := srv.MustClient(b)
	var node string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) != 1 || len(nodes.Items[0].Spec.PodCIDRs) != 2 {
			return false, nil
		}
		node = nodes.Items[0].Name
		return true, nil
	})
	if err != nil {
		b.Fatalf("no dual-stack node: %v", err)
	}
	return client, node
}

// webPod is a Pod on node, labelled app=name, greeting on port 8080.
func webPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](0), Containers: []corev1.Container{{
			Name: "web", Image: harness.TestImage, ImagePullPolicy: corev1.PullNever, Args: []string{"serve", "8080"},
		}}},
	}
}

// reached waits until the host gets a greeting at addr, trying a new
// connection every pollInterval, and returns when the first one did.
func reached(ctx context.Context, addr func() string) (time.Time, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan time.Time, 1)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		if a := addr(); a != "" {
			go func() {
				var d net.Dialer
				c, err := d.DialContext(ctx, "tcp", a)
				if err != nil {
					return
				}
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(time.Second))
				buf := make([]byte, 5)
				if _, err := io.ReadFull(c, buf); err == nil && string(buf) == "hello" {
					select {
					case got <- time.Now():
					default:
					}
				}
			}()
		}
		select {
		case t := <-got:
			return t, nil
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// familyTimes are the times of each family, IPv4 first.
type familyTimes [2][]time.Duration

// timeBoth times, from start, the greeting at the address of each family
// that addrs gives (the family's index, "" while it is not known).
func (f *familyTimes) timeBoth(ctx context.Context, b *testing.B, start time.Time, addrs func(family int) string) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for family := range 2 {
		wg.Go(func() {
			at, err := reached(ctx, func() string { return addrs(family) })
			if err != nil {
				b.Errorf("%s not reached: %v", []string{"IPv4", "IPv6"}[family], err)
				return
			}
			mu.Lock()
			f[family] = append(f[family], at.Sub(start))
			mu.Unlock()
		})
	}
	wg.Wait()
}

// report reports each family's p50 and max, and the IPv6/IPv4 ratio of
// the medians.
func (f *familyTimes) report(b *testing.B) {
	var p50 [2]float64
	for family, name := range []string{"v4", "v6"} {
		all := slices.Sorted(slices.Values(f[family]))
		if len(all) == 0 {
			return
		}
		p50[family] = float64(all[len(all)/2].Microseconds()) / 1000
		b.ReportMetric(p50[family], name+"-p50-ms")
		b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, name+"-max-ms")
	}
	b.ReportMetric(p50[1]/p50[0], "v6/v4")
}

// BenchmarkPodReachable creates a Pod each iteration and times, from its
// create call, until the host gets its greeting at its IPv4 and at its
// IPv6 address (its IPs polled from the API as the kubelet reports them).
func BenchmarkPodReachable(b *testing.B) {
	client, node := startServer(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var times familyTimes
	b.ResetTimer()
	for i := range b.N {
		pod := webPod(fmt.Sprintf("web-%d", i), node)
		var mu sync.Mutex
		var ips []string
		start := time.Now()
		if _, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		watchCtx, stop := context.WithCancel(ctx)
		go func() {
			_ = wait.PollUntilContextCancel(watchCtx, pollInterval, true, func(ctx context.Context) (bool, error) {
				p, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
				if err != nil || len(p.Status.PodIPs) != 2 {
					return false, nil
				}
				mu.Lock()
				ips = []string{p.Status.PodIPs[0].IP, p.Status.PodIPs[1].IP}
				mu.Unlock()
				return true, nil
			})
		}()
		times.timeBoth(ctx, b, start, func(family int) string {
			mu.Lock()
			defer mu.Unlock()
			if len(ips) != 2 {
				return ""
			}
			return net.JoinHostPort(ips[family], "8080")
		})
		stop()
		if err := client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	times.report(b)
	deleteAll(b, client)
}

// BenchmarkServiceReachable creates, each iteration, a dual-stack Service
// in front of one Pod, and times from its create call until the host gets
// the Pod's greeting through its IPv4 and through its IPv6 ClusterIP:
// kube-proxy programming each family's rules.
func BenchmarkServiceReachable(b *testing.B) {
	client, node := startServer(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pod := webPod("web", node)
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
		ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}
	if _, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready, nil
	})
	if err != nil {
		b.Fatalf("Pod not ready: %v", err)
	}
	var times familyTimes
	b.ResetTimer()
	for i := range b.N {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: metav1.NamespaceDefault},
			Spec: corev1.ServiceSpec{Selector: pod.Labels, IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicyRequireDualStack),
				IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
				Ports:      []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		start := time.Now()
		svc, err := client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if len(svc.Spec.ClusterIPs) != 2 {
			b.Fatalf("Service ClusterIPs %v, want one of each family", svc.Spec.ClusterIPs)
		}
		times.timeBoth(ctx, b, start, func(family int) string { return net.JoinHostPort(svc.Spec.ClusterIPs[family], "80") })
		if err := client.CoreV1().Services(svc.Namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	times.report(b)
	deleteAll(b, client)
}

// deleteAll deletes the Pods before the node's containerd stops.
func deleteAll(b *testing.B, client kubernetes.Interface) {
	if err := client.CoreV1().Pods(metav1.NamespaceDefault).DeleteCollection(context.Background(),
		metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		b.Error(err)
	}
}
