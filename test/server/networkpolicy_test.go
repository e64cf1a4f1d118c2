package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/kubeboot/kubeboot/internal/components/networkpolicy"
	"github.com/kubeboot/kubeboot/test/harness"
)

// checkNetworkPolicy checks the nodes' enforcement of NetworkPolicy on a
// two-node cluster: web-a on the server's node and web-b on the agent's,
// in the default namespace, each serving on 8080, web-a also behind the
// Service web-a (port 80). It adds a Pod in another namespace on the
// agent's node, and leaves no policy behind.
func checkNetworkPolicy(ctx context.Context, t *testing.T, srv *harness.APIServer, client kubernetes.Interface, webA, webB *corev1.Pod) {
	for _, name := range []string{nodeName, agentNodeName} {
		waitNodeCondition(ctx, t, client, name, networkpolicy.ConditionType, corev1.ConditionFalse)
	}
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "np-other", Labels: map[string]string{"team": "other"}}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	outsider := webPod("outsider", agentNodeName, "serve")
	outsider.Namespace = other.Name
	outsider = runPod(ctx, t, client, outsider)
	// Each check is made at each of the Pods' addresses: a policy holds
	// over both families of a dual-stack cluster.
	a, o := podAddrs(webA, "8080"), podAddrs(outsider, "8080")
	const svcA = "web-a.default.svc.cluster.local:80"

	policies := client.NetworkingV1().NetworkPolicies(metav1.NamespaceDefault)
	// web-a takes only web-b, on 8080, whatever the path.
	onlyB := allowOnly("web-a-from-web-b", "web-a", networkingv1.PolicyTypeIngress, "web-b")
	if _, err := policies.Create(ctx, onlyB, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("ingress: a selected peer on the other node reaches the Pod, by IP and through its Service", func(t *testing.T) {
		waitReach(ctx, t, srv, outsider, false, a...)
		waitReach(ctx, t, srv, webB, true, a...)
		waitReach(ctx, t, srv, webB, true, svcA)
	})
	t.Run("ingress: a Pod of another namespace is refused, by IP and through the Service", func(t *testing.T) {
		waitReach(ctx, t, srv, outsider, false, svcA)
	})
	t.Run("ingress: the Pod's own node always reaches it (the kubelet's probes)", func(t *testing.T) {
		for _, addr := range a {
			waitHello(t, addr, "hello from web-a")
		}
		p, err := client.CoreV1().Pods(webA.Namespace).Get(ctx, webA.Name, metav1.GetOptions{})
		if err != nil || !podutil.IsPodReady(p) {
			t.Errorf("web-a not Ready under its policy (%v): %+v", err, p.Status.Conditions)
		}
	})

	// web-b may reach only web-a, on 8080, and nothing else.
	onlyA := allowOnly("web-b-to-web-a", "web-b", networkingv1.PolicyTypeEgress, "web-a")
	if _, err := policies.Create(ctx, onlyA, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("egress: the Pod reaches only what its policy allows", func(t *testing.T) {
		waitReach(ctx, t, srv, webB, false, o...)
		waitReach(ctx, t, srv, webB, true, a...)
		// The Service's address is rewritten to web-a's before the
		// policy sees it.
		// (Its name is not resolved: DNS is not allowed.)
		svc, err := client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "web-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ip := range svc.Spec.ClusterIPs {
			waitReach(ctx, t, srv, webB, true, net.JoinHostPort(ip, "80"))
		}
	})

	t.Run("a connection opened before a policy stays open; new ones are refused", func(t *testing.T) {
		chatter := runPod(ctx, t, client, webPod("chatter", agentNodeName, "chat"))
		defer deletePod(ctx, t, client, chatter.Namespace, chatter.Name)
		addr := net.JoinHostPort(chatter.Status.PodIP, "8080")
		// From this host, the other node's: its traffic is judged.
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		say := func(line string) error {
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.WriteString(conn, line+"\n"); err != nil {
				return err
			}
			got, err := r.ReadString('\n')
			if err == nil && got != line+"\n" {
				err = fmt.Errorf("answered %q", got)
			}
			return err
		}
		if err := say("before"); err != nil {
			t.Fatalf("before the policy: %v", err)
		}
		denyAll := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "chatter-deny"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "chatter"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
		if _, err := policies.Create(ctx, denyAll, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = policies.Delete(ctx, denyAll.Name, metav1.DeleteOptions{}) }()
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
			}
			return err != nil, nil
		})
		if err != nil {
			t.Fatalf("a new connection to %s is still accepted under a deny-all policy", addr)
		}
		if err := say("after"); err != nil {
			t.Errorf("the connection opened before the policy: %v, want it kept", err)
		}
	})

	t.Run("without policies, everything is reachable again", func(t *testing.T) {
		for _, name := range []string{onlyA.Name, onlyB.Name} {
			if err := policies.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		waitReach(ctx, t, srv, outsider, true, a...)
		waitReach(ctx, t, srv, webB, true, o...)
	})
	deletePod(ctx, t, client, outsider.Namespace, outsider.Name)
}

// allowOnly is a policy named name that isolates the Pods labelled
// app=app in direction and allows them only the Pods labelled app=peer,
// on port 8080.
func allowOnly(name, app string, direction networkingv1.PolicyType, peer string) *networkingv1.NetworkPolicy {
	port := intstr.FromInt32(8080)
	peers := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": peer}}}}
	ports := []networkingv1.NetworkPolicyPort{{Port: &port}}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			PolicyTypes: []networkingv1.PolicyType{direction},
		},
	}
	if direction == networkingv1.PolicyTypeIngress {
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: peers, Ports: ports}}
	} else {
		np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: peers, Ports: ports}}
	}
	return np
}

// podAddrs are the Pod's addresses, one of each of its IPs, at port.
func podAddrs(p *corev1.Pod, port string) []string {
	var addrs []string
	for _, ip := range p.Status.PodIPs {
		addrs = append(addrs, net.JoinHostPort(ip.IP, port))
	}
	return addrs
}

// waitReach waits until from's dial of each of addrs succeeds (reachable)
// or fails.
func waitReach(ctx context.Context, t *testing.T, srv *harness.APIServer, from *corev1.Pod, reachable bool, addrs ...string) {
	t.Helper()
	for _, addr := range addrs {
		waitReachOne(ctx, t, srv, from, addr, reachable)
	}
}

func waitReachOne(ctx context.Context, t *testing.T, srv *harness.APIServer, from *corev1.Pod, addr string, reachable bool) {
	t.Helper()
	var out string
	var err error
	pollErr := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		out, err = srv.KubectlOutput("exec", "-n", from.Namespace, from.Name, "--", harness.TestImageCommand, "dial", addr)
		return (err == nil) == reachable, nil
	})
	if pollErr != nil {
		t.Errorf("%s/%s dialling %s: %q (%v); want reachable: %v", from.Namespace, from.Name, addr, out, err, reachable)
	}
}

// waitNodeCondition waits for node's condition typ to have status.
func waitNodeCondition(ctx context.Context, t *testing.T, client kubernetes.Interface, node string, typ corev1.NodeConditionType, status corev1.ConditionStatus) {
	t.Helper()
	var last []corev1.NodeCondition
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = n.Status.Conditions
		for _, c := range n.Status.Conditions {
			if c.Type == typ {
				return c.Status == status, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("node %s: conditions %+v; want %s %s", node, last, typ, status)
	}
}

// watchIsolation isolates pod for ingress with a policy, waits until its
// node's table (this machine's: the server's node) has it, then reads the
// table every 100 ms until the returned function is called with a client
// (of the server then): it deletes the policy through it and reports how
// many reads did not find the Pod isolated, of how many, and the test of
// the table it read.
func watchIsolation(ctx context.Context, t *testing.T, client kubernetes.Interface, pod *corev1.Pod) func(kubernetes.Interface) (missed, reads int, isolated func() bool) {
	t.Helper()
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: pod.Name + "-isolated"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: pod.Labels},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if _, err := client.NetworkingV1().NetworkPolicies(pod.Namespace).Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	isolated := func() bool {
		family := "v4"
		if strings.Contains(pod.Status.PodIP, ":") {
			family = "v6"
		}
		out, err := runCommand("nft", "list", "map", "inet", networkpolicy.TableName, "ingress-"+family)
		return err == nil && strings.Contains(out, pod.Status.PodIP+" ")
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return isolated(), nil
	}); err != nil {
		t.Fatalf("Pod %s not isolated in this node's table", pod.Name)
	}
	stop, done := make(chan struct{}), make(chan [2]int)
	go func() {
		var missed, reads int
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				done <- [2]int{missed, reads}
				return
			case <-tick.C:
				reads++
				if !isolated() {
					missed++
				}
			}
		}
	}()
	return func(client kubernetes.Interface) (int, int, func() bool) {
		close(stop)
		r := <-done
		if err := client.NetworkingV1().NetworkPolicies(pod.Namespace).Delete(ctx, deny.Name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
		return r[0], r[1], isolated
	}
}
