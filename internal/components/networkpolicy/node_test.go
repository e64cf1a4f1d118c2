//go:build linux

package networkpolicy

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/knftables"
)

// testNFT is a fake table whose transactions fail while failures lasts,
// safe to read while the Enforcer writes it.
type testNFT struct {
	*knftables.Fake
	mu       sync.Mutex
	failures int
	// runs counts the transactions written.
	runs int
}

func (n *testNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.failures > 0 {
		n.failures--
		return errors.New("nft: a transaction that fails")
	}
	n.runs++
	return n.Fake.Run(ctx, tx)
}

func (n *testNFT) List(ctx context.Context, objectType string) ([]string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.Fake.List(ctx, objectType)
}

func (n *testNFT) written() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.runs
}

// isolated reports whether ip is in the map m.
func (n *testNFT) isolated(m, ip string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.Table != nil && n.Table.Maps[m] != nil && n.Table.Maps[m].FindElement(ip) != nil
}

// startEnforcer runs an Enforcer for node on client and nft until the
// test ends; nft nil: nftables is not usable.
func startEnforcer(t *testing.T, client *fake.Clientset, nft *testNFT) (*Enforcer, <-chan error) {
	t.Helper()
	return startEnforcerResyncing(t, client, nft, time.Hour)
}

// startEnforcerResyncing is startEnforcer with the given resync interval.
func startEnforcerResyncing(t *testing.T, client *fake.Clientset, nft *testNFT, resync time.Duration) (*Enforcer, <-chan error) {
	t.Helper()
	e := NewEnforcer(Node{Name: node, Client: client, MinSyncInterval: time.Millisecond, ResyncInterval: resync})
	e.newNFT = func() (knftables.Interface, error) {
		if nft == nil {
			return nil, errors.New("no nft here")
		}
		return nft, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-e.Synced():
	case <-time.After(30 * time.Second):
		t.Fatal("the first ruleset was not written")
	}
	return e, done
}

// waitCondition waits for the Node's NetworkPolicy condition to have
// status and reason.
func waitCondition(t *testing.T, client *fake.Clientset, status corev1.ConditionStatus, reason string) {
	t.Helper()
	var last *corev1.NodeCondition
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for i, c := range n.Status.Conditions {
			if c.Type == ConditionType {
				last = &n.Status.Conditions[i]
				return c.Status == status && c.Reason == reason, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the Node's %s condition is %+v, want %s %s", ConditionType, last, status, reason)
	}
}

func waitIsolated(t *testing.T, nft *testNFT, m, ip string, want bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return nft.isolated(m, ip) == want, nil
	})
	if err != nil {
		t.Fatalf("%s in %s: %v, want %v", ip, m, !want, want)
	}
}

// TestEnforcerFollowsTheCluster: the ruleset follows policies, Pods and
// Namespaces as they change, and the Node says it is enforced.
func TestEnforcerFollowsTheCluster(t *testing.T) {
	web := testPod("x", "web", node, "10.42.0.2")
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, web, namespace("x", nil))
	nft := &testNFT{Fake: knftables.NewFake(knftables.InetFamily, TableName)}
	startEnforcer(t, client, nft)
	if nft.isolated("ingress-v4", "10.42.0.2") {
		t.Error("web is isolated before any policy")
	}
	waitCondition(t, client, corev1.ConditionFalse, ReasonEnforced)
	ctx := context.Background()

	deny := policy("x", "deny", "web", networkingv1.NetworkPolicySpec{PolicyTypes: policyTypes(in)})
	if _, err := client.NetworkingV1().NetworkPolicies("x").Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitIsolated(t, nft, "ingress-v4", "10.42.0.2", true)

	// A new Pod the policy selects, then one it does not.
	web2 := testPod("x", "web", node, "10.42.0.3")
	web2.Name = "web2"
	if _, err := client.CoreV1().Pods("x").Create(ctx, web2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitIsolated(t, nft, "ingress-v4", "10.42.0.3", true)
	web2.Labels["app"] = "other"
	if _, err := client.CoreV1().Pods("x").Update(ctx, web2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitIsolated(t, nft, "ingress-v4", "10.42.0.3", false)

	if err := client.NetworkingV1().NetworkPolicies("x").Delete(ctx, "deny", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitIsolated(t, nft, "ingress-v4", "10.42.0.2", false)
}

// TestEnforcerWithoutNFTables: a node that cannot use nftables says so in
// its Node's condition and in an event, and runs on (its Pods start).
func TestEnforcerWithoutNFTables(t *testing.T) {
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
	startEnforcer(t, client, nil)
	waitCondition(t, client, corev1.ConditionTrue, ReasonNFTUnavailable)
	waitEvent(t, client, ReasonNFTUnavailable)
}

// TestEnforcerRetries: a failed transaction leaves the previous ruleset,
// is reported, and is tried again until it holds.
func TestEnforcerRetries(t *testing.T) {
	web := testPod("x", "web", node, "10.42.0.2")
	deny := policy("x", "deny", "web", networkingv1.NetworkPolicySpec{PolicyTypes: policyTypes(in)})
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, web, deny)
	nft := &testNFT{Fake: knftables.NewFake(knftables.InetFamily, TableName), failures: 3}
	startEnforcer(t, client, nft)
	waitEvent(t, client, ReasonSyncFailed)
	if !nft.isolated("ingress-v4", "10.42.0.2") {
		t.Error("web is not isolated once the transaction held")
	}
	waitCondition(t, client, corev1.ConditionFalse, ReasonEnforced)
}

func waitEvent(t *testing.T, client *fake.Clientset, reason string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.Reason == reason && e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == node {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event on the Node", reason)
	}
}

// TestEnforcerResync: with nothing changed, a resync leaves the table as
// it stands (no transaction), and so does an update that changes nothing
// the ruleset reads (a Pod's conditions); a table another program
// deleted is written again at the next resync.
func TestEnforcerResync(t *testing.T) {
	web := testPod("x", "web", node, "10.42.0.2")
	deny := policy("x", "deny", "web", networkingv1.NetworkPolicySpec{PolicyTypes: policyTypes(in)})
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, web, namespace("x", nil), deny)
	nft := &testNFT{Fake: knftables.NewFake(knftables.InetFamily, TableName)}
	const resync = 10 * time.Millisecond
	startEnforcerResyncing(t, client, nft, resync)
	waitIsolated(t, nft, "ingress-v4", "10.42.0.2", true)

	// Whatever the start still owes is written first.
	time.Sleep(100 * time.Millisecond)
	before := nft.written()
	time.Sleep(30 * resync)
	if n := nft.written() - before; n != 0 {
		t.Errorf("%d transactions in %d resyncs of an unchanged cluster, want none", n, 30)
	}

	// The kubelet's reports of the Pod do not rewrite the table.
	ctx := context.Background()
	web.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	if _, err := client.CoreV1().Pods("x").UpdateStatus(ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * resync)
	if n := nft.written() - before; n != 0 {
		t.Errorf("%d transactions after the Pod's conditions changed, want none", n)
	}

	tx := nft.NewTransaction()
	tx.Delete(&knftables.Table{})
	if err := nft.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	waitIsolated(t, nft, "ingress-v4", "10.42.0.2", true)
}
