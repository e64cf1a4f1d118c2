package simulatednodes

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

func podIPsNode(name string, cidrs ...string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{PodCIDR: cidrs[0], PodCIDRs: cidrs},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.18.0.1"}, {Type: corev1.NodeHostName, Address: name}}},
	}
}

func podIPsPod(name, node string, ips ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: node},
	}
	for _, ip := range ips {
		pod.Status.PodIPs = append(pod.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return pod
}

// TestPodIPs: a Pod keeps its IPs however often the stage asks; Pods get
// distinct usable IPs from each of their node's pod CIDRs; the IPs Pods
// already show (a restart) are not handed out again; a full node takes
// back the IPs of its deleted Pods, and only theirs; a host-network Pod
// gets its node's address.
func TestPodIPs(t *testing.T) {
	ctx := t.Context()
	t.Run("one set per Pod, distinct, from each pod CIDR", func(t *testing.T) {
		client := fake.NewClientset(podIPsNode("n", "10.0.0.0/24", "fd00::/120"))
		p := newPodIPs(ctx, client)
		seen := map[string]bool{}
		for i := range 20 {
			uid := string(rune('a' + i))
			ips, err := p.with("n", false, uid, "", "")
			if err != nil {
				t.Fatal(err)
			}
			again, err := p.with("n", false, uid, "", "")
			if err != nil || !slices.Equal(ips, again) {
				t.Fatalf("Pod %s: %v, then %v (%v): want the same IPs", uid, ips, again, err)
			}
			if len(ips) != 2 {
				t.Fatalf("Pod %s: %v, want one IP from each pod CIDR", uid, ips)
			}
			for k, cidr := range []string{"10.0.0.0/24", "fd00::/120"} {
				a := netip.MustParseAddr(ips[k])
				prefix := netip.MustParsePrefix(cidr)
				if !prefix.Contains(a) || a == prefix.Addr() {
					t.Errorf("Pod %s: IP %s is not a Pod's address in %s", uid, a, cidr)
				}
				if seen[ips[k]] {
					t.Errorf("Pod %s: IP %s handed out twice", uid, a)
				}
				seen[ips[k]] = true
			}
		}
	})
	t.Run("IPs Pods show are in use", func(t *testing.T) {
		client := fake.NewClientset(podIPsNode("n", "10.0.0.0/30"),
			podIPsPod("running", "n", "10.0.0.1"), podIPsPod("elsewhere", "other", "10.0.0.2"),
			podIPsPod("new", "n"), podIPsPod("another", "n"))
		p := newPodIPs(ctx, client)
		ips, err := p.with("n", false, "uid-new", "", "")
		if err != nil || !slices.Equal(ips, []string{"10.0.0.2"}) {
			t.Fatalf("new Pod: %v (%v), want 10.0.0.2: 10.0.0.1 is the running Pod's, .0 and .3 no Pod's", ips, err)
		}
		if ips, err := p.with("n", false, "uid-running", "", ""); err != nil || !slices.Equal(ips, []string{"10.0.0.1"}) {
			t.Errorf("running Pod: %v (%v), want the IP it shows, 10.0.0.1", ips, err)
		}
		if _, err := p.with("n", false, "uid-another", "", ""); err == nil {
			t.Error("a third Pod on a /30 got an IP")
		}
	})
	t.Run("a full node takes back its deleted Pods' IPs", func(t *testing.T) {
		objects := []runtime.Object{podIPsNode("n", "10.0.0.0/30")}
		for _, name := range []string{"p1", "p2", "p3"} {
			objects = append(objects, podIPsPod(name, "n"))
		}
		client := fake.NewClientset(objects...)
		p := newPodIPs(ctx, client)
		ip1, err1 := p.with("n", false, "uid-p1", "", "")
		ip2, err2 := p.with("n", false, "uid-p2", "", "")
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if _, err := p.with("n", false, "uid-p3", "", ""); err == nil {
			t.Fatal("p3 got an IP while p1 and p2 hold the node's two")
		}
		if err := client.CoreV1().Pods("default").Delete(ctx, "p1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		ip3, err := p.with("n", false, "uid-p3", "", "")
		if err != nil || !slices.Equal(ip3, ip1) {
			t.Fatalf("p3 after p1 is deleted: %v (%v), want p1's %v", ip3, err, ip1)
		}
		// p2's status does not show its IP yet: it is still p2's.
		if again, err := p.with("n", false, "uid-p2", "", ""); err != nil || !slices.Equal(again, ip2) {
			t.Errorf("p2 after the node was reread: %v (%v), want %v", again, err, ip2)
		}
	})
	t.Run("host network", func(t *testing.T) {
		p := newPodIPs(ctx, fake.NewClientset(podIPsNode("n", "10.0.0.0/24")))
		if ips, err := p.with("n", true, "host", "", ""); err != nil || !slices.Equal(ips, []string{"198.18.0.1"}) {
			t.Errorf("host-network Pod: %v (%v), want the node's InternalIP", ips, err)
		}
	})
	t.Run("unknown node", func(t *testing.T) {
		if _, err := newPodIPs(ctx, fake.NewClientset()).with("missing", false, "a", "", ""); err == nil {
			t.Error("a Pod on a node that does not exist got an IP")
		}
	})
}
