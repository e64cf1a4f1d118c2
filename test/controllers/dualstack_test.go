package controllers

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestDualStackSimulated runs a dual-stack `kubeboot server` (k3s's flag
// names: --cluster-cidr and --service-cidr of each family, IPv4 first) on
// simulated nodes: node IPAM gives each node a pod CIDR of each family,
// a Pod gets an IP of each, and a Service asking for both families gets a
// ClusterIP of each from the Service ranges. Traffic is test/server's.
func TestDualStackSimulated(t *testing.T) {
	var (
		pods4     = netip.MustParsePrefix("10.42.0.0/16")
		pods6     = netip.MustParsePrefix("fd00:42::/56")
		services4 = netip.MustParsePrefix("10.96.0.0/16")
		services6 = netip.MustParsePrefix("fd00:96::/112")
	)
	_, client := harness.StartLocalServer(t, "--simulated-nodes=2", "--flannel-backend=none",
		"--cluster-cidr="+pods4.String()+","+pods6.String(), "--service-cidr="+services4.String()+","+services6.String())
	ctx := context.Background()
	in := func(s string, p netip.Prefix, bits int) bool {
		c, err := netip.ParsePrefix(s)
		return err == nil && c.Bits() == bits && p.Contains(c.Addr())
	}
	harness.Eventually(t, 30*time.Second, "each node's pod CIDRs: an IPv4 /24 and an IPv6 /64", func(ctx context.Context) (bool, string) {
		nodes, err := simulatedNodes(ctx, client)
		if err != nil || len(nodes) != 2 {
			return false, fmt.Sprintf("%d nodes, %v", len(nodes), err)
		}
		for _, n := range nodes {
			if c := n.Spec.PodCIDRs; len(c) != 2 || !in(c[0], pods4, 24) || !in(c[1], pods6, 64) {
				return false, fmt.Sprintf("node %s: %v", n.Name, c)
			}
		}
		return true, ""
	})

	const ns = "dual-stack"
	workNamespace(t, client, ns)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}}}}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "the Pod's IPs, one of each family in its node's pod CIDRs", func(ctx context.Context) (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ips := p.Status.PodIPs
		if len(ips) != 2 {
			return false, fmt.Sprintf("pod IPs %v", ips)
		}
		a4, err4 := netip.ParseAddr(ips[0].IP)
		a6, err6 := netip.ParseAddr(ips[1].IP)
		return err4 == nil && err6 == nil && pods4.Contains(a4) && pods6.Contains(a6) && p.Status.PodIP == ips[0].IP,
			fmt.Sprintf("pod IP %s, IPs %v", p.Status.PodIP, ips)
	})

	for _, tc := range []struct {
		name   string
		policy corev1.IPFamilyPolicy
		want   []netip.Prefix
	}{
		{"both", corev1.IPFamilyPolicyRequireDualStack, []netip.Prefix{services4, services6}},
		{"either", corev1.IPFamilyPolicySingleStack, []netip.Prefix{services4}},
	} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: tc.name}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"}, IPFamilyPolicy: ptr.To(tc.policy),
			Ports: []corev1.ServicePort{{Port: 80}}}}
		got, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("Service %s (%s): %v", tc.name, tc.policy, err)
		}
		ok := len(got.Spec.ClusterIPs) == len(tc.want)
		for i := 0; ok && i < len(tc.want); i++ {
			a, err := netip.ParseAddr(got.Spec.ClusterIPs[i])
			ok = err == nil && tc.want[i].Contains(a)
		}
		if !ok {
			t.Errorf("Service %s (%s): ClusterIPs %v, families %v; want one in each of %v", tc.name, tc.policy, got.Spec.ClusterIPs, got.Spec.IPFamilies, tc.want)
		}
	}
}

// TestClusterDNSGainsAFamily: a dual-stack cluster whose cluster DNS was
// of one family (--cluster-dns of one address, as every dual-stack
// cluster before the cluster DNS had an address of each) gets the second
// at its next start without the flag: the kube-dns Service becomes
// RequireDualStack at the tenth address of each Service range, keeping
// its first; started again with the one address, it drops the second.
func TestClusterDNSGainsAFamily(t *testing.T) {
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	args := []string{"--bind-address", "127.0.0.1", "--secure-port", "0", "--flannel-backend=none",
		"--cluster-cidr=10.42.0.0/16,fd00:42::/56", "--service-cidr=10.96.0.0/16,fd00:96::/112"}
	for _, step := range []struct {
		flags []string
		want  []string
	}{
		{[]string{"--cluster-dns=10.96.0.10"}, []string{"10.96.0.10"}},
		{nil, []string{"10.96.0.10", "fd00:96::a"}},
		{[]string{"--cluster-dns=10.96.0.10"}, []string{"10.96.0.10"}},
	} {
		srv := harness.StartReadyServer(t, time.Minute, bin, dataDir, append(slices.Clone(args), step.flags...)...)
		client := srv.MustClient(t)
		harness.Eventually(t, 30*time.Second, fmt.Sprintf("the kube-dns Service at %v (%v)", step.want, step.flags), func(ctx context.Context) (bool, string) {
			svc, err := client.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, "kube-dns", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return slices.Equal(svc.Spec.ClusterIPs, step.want), fmt.Sprintf("ClusterIPs %v, policy %v", svc.Spec.ClusterIPs, ptr.Deref(svc.Spec.IPFamilyPolicy, ""))
		})
		if err := srv.Terminate(30 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
}
