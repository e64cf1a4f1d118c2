package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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

// The two machines of TestTwoNodes, on one veth pair, and their IPv6
// addresses in a dual-stack cluster.
const (
	serverMachine  = "198.51.100.1"
	agentMachine   = "198.51.100.2"
	serverMachine6 = "2001:db8::1"
	agentMachine6  = "2001:db8::2"
	agentNodeName  = "node-b"
	// agentExternal and agentExternal6 are the agent's external
	// addresses (--node-external-ip), on its interface beside its own.
	agentExternal  = "198.51.100.12"
	agentExternal6 = "2001:db8::12"
)

// machines are the server's and the agent's machines' addresses of the
// stack's families, as --node-ip takes them.
func machines(s harness.Stack) (server, agent string) {
	return s.Addrs(serverMachine, serverMachine6), s.Addrs(agentMachine, agentMachine6)
}

// stackServerArgs are the server's flags for the stack: its node's
// addresses, where it serves, and the Pods' and Services' ranges of the
// stack's families, the Pods' IPv6 traffic masqueraded as k3s's
// --flannel-ipv6-masq does.
func stackServerArgs(s harness.Stack) []string {
	server, _ := machines(s)
	primary := s.Primary(serverMachine, serverMachine6)
	args := []string{"--node-ip=" + server, "--bind-address", primary, "--advertise-address", primary,
		"--service-cidr=" + strings.Join(s.ServiceCIDRs(), ",")}
	if s != harness.StackIPv4 {
		args = append(args, "--cluster-cidr="+s.ClusterCIDR(), "--flannel-ipv6-masq")
	}
	return args
}

// TestTwoNodes runs a dual-stack cluster of two machines, each a network
// and mount namespace with its own containerd, joined by a veth pair
// with an address of each family: `kubeboot server --node` on one,
// `kubeboot agent` on the other. It checks that both nodes join Ready on
// the pod network (flannel's host-gw between them: routes to the other
// node's pod CIDRs through its addresses), with the backend the server
// says, that the server's host reaches a Pod on the agent's node by each
// of its IPs, that a Pod reaches a Pod on the other node by each IP, and a
// Service on the other node by its DNS name (the cluster DNS on the
// server, A and AAAA, through kube-proxy on the agent's node) and by each
// of its ClusterIPs; that Ingresses and Gateways are served at every
// node's address of each family; that NetworkPolicy holds over both
// families; and that the agent's node keeps its Pods running while the
// server is gone, and is Ready again once it is back.
func TestTwoNodes(t *testing.T) { testTwoNodes(t, "host-gw", harness.StackDual) }

// TestTwoNodesIPv6 is TestTwoNodes on an IPv6-only cluster on flannel's
// vxlan backend (the default; the conformance slices run it on IPv4):
// every address and range is IPv6, the agent joins the server at its
// IPv6 address, and the cluster DNS is at an IPv6 ClusterIP.
func TestTwoNodesIPv6(t *testing.T) { testTwoNodes(t, "vxlan", harness.StackIPv6) }

// startAgentMachine is the start of a test of two machines, the server's
// and the agent's: in the agent's machine it runs the agent and returns
// false, as it does in the test's own process outside its network
// namespace; in the server's machine it starts the agent's and returns
// the binary and where to hand the token over (HandOverToken). The
// machines have the addresses of the stack's families.
func startAgentMachine(t *testing.T, s harness.Stack) (bin, tokenFile string, ok bool) {
	if env, ok := harness.InMachine(); ok {
		runAgentMachine(t, env)
		return "", "", false
	}
	harness.RequireContainerd(t)
	requireNFT(t)
	if !harness.InNetNS(t) {
		return "", "", false
	}
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	// The token is the server's to make; the agent's machine is started
	// first, so that it is ready when the token is: it reads it from a
	// file this machine writes.
	tokenFile = filepath.Join(t.TempDir(), "token")
	addr, peer := machines(s)
	harness.StartMachine(t, "eth0", addr, peer, map[string]string{"token": tokenFile, "stack": string(s)})
	return bin, tokenFile, true
}

func testTwoNodes(t *testing.T, backend string, s harness.Stack) {
	bin, tokenFile, ok := startAgentMachine(t, s)
	if !ok {
		return
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	runtime := harness.EmbeddedContainerd(t, harness.NodeDir(dataDir))
	// Only the server's node has it: the agent's pulls it from there.
	harness.WriteTestImage(t, harness.NodeDir(dataDir), peerImage, map[string][]byte{peerImageFile: []byte(peerImageMessage)})
	harness.RouteOut(t, "eth0", s.ServiceCIDRs())
	serverArgs := append(append(nodeServerArgs(t, serverMachine, ""), runtime...), "--flannel-backend="+backend,
		"--embedded-registry", "--private-registry="+writePeerRegistries(t))
	serverArgs = append(append(serverArgs, harness.FastMetricsArgs...), stackServerArgs(s)...)
	srv := harness.StartReadyServer(t, 2*time.Minute, bin, dataDir, serverArgs...)
	harness.HandOverToken(t, dataDir, tokenFile)
	client := srv.MustClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	for _, name := range []string{nodeName, agentNodeName} {
		waitNode(ctx, t, client, name)
		waitPodNetwork(ctx, t, client, name)
	}
	webA := runPod(ctx, t, client, webPod("web-a", nodeName, "serve"))
	webB := runPod(ctx, t, client, webPod("web-b", agentNodeName, "serve"))
	families := s.Families()
	if len(webA.Status.PodIPs) != families || len(webB.Status.PodIPs) != families {
		t.Fatalf("Pod IPs %v and %v, want %d each, one of each family", webA.Status.PodIPs, webB.Status.PodIPs, families)
	}

	t.Run("the backend routes the other node's pod CIDRs", func(t *testing.T) {
		n, err := client.CoreV1().Nodes().Get(ctx, agentNodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(n.Spec.PodCIDRs) != families {
			t.Fatalf("node %s's pod CIDRs %v, want %d", agentNodeName, n.Spec.PodCIDRs, families)
		}
		for _, cidr := range n.Spec.PodCIDRs {
			want := map[string]string{"vxlan": "dev flannel.1", "host-gw": "via " + agentMachine + " dev eth0"}[backend]
			family := "-4"
			if strings.Contains(cidr, ":") {
				want = map[string]string{"vxlan": "dev flannel-v6.1", "host-gw": "via " + agentMachine6 + " dev eth0"}[backend]
				family = "-6"
			}
			if out, err := runCommand("ip", family, "route", "show", cidr); err != nil || !strings.Contains(out, want) {
				t.Errorf("route to node %s's pod CIDR %s: %q (%v), want %q", agentNodeName, cidr, out, err, want)
			}
		}
	})

	if s != harness.StackIPv4 {
		t.Run("the Pods' IPv6 traffic leaving the cluster is masqueraded (--flannel-ipv6-masq)", func(t *testing.T) {
			out, err := runCommand("nft", "list", "chain", "ip6", "flannel-ipv6", "postrtg")
			if err != nil || !strings.Contains(out, "ip6 saddr fd00:42::/56 ip6 daddr != ff00::/8 masquerade") {
				t.Errorf("nft list chain ip6 flannel-ipv6 postrtg: %v\n%s\nwant the Pods' range masqueraded", err, out)
			}
		})
	}

	t.Run("this host reaches a Pod on the other node by each of its IPs", func(t *testing.T) {
		for _, ip := range webB.Status.PodIPs {
			waitHello(t, net.JoinHostPort(ip.IP, "8080"), "hello from web-b")
		}
	})

	t.Run("a Pod reaches a Pod on the other node by each of its IPs", func(t *testing.T) {
		for _, ip := range webB.Status.PodIPs {
			if out := srv.Kubectl(t, "exec", "web-a", "--", harness.TestImageCommand, "dial", net.JoinHostPort(ip.IP, "8080")); out != "hello from web-b\n" {
				t.Errorf("web-a dialling web-b at %s: %q, want its greeting", ip.IP, out)
			}
		}
	})

	t.Run("a Pod reaches a Service on the other node by name and by each ClusterIP", func(t *testing.T) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web-a", Namespace: metav1.NamespaceDefault},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web-a"}, IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicyPreferDualStack),
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		svc, err := client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(svc.Spec.ClusterIPs) != families {
			t.Fatalf("the Service's ClusterIPs %v, want %d", svc.Spec.ClusterIPs, families)
		}
		// kube-proxy on the agent's node programs the Service (and the
		// DNS's) once it sees them.
		var out string
		err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
			o, err := srv.KubectlOutput("exec", "web-b", "--", harness.TestImageCommand, "dial", "web-a.default.svc.cluster.local:80")
			out = o
			return err == nil && o == "hello from web-a\n", nil
		})
		if err != nil {
			t.Errorf("web-b dialling web-a.default.svc.cluster.local:80: %q (%v), want web-a's greeting (web-a at %s)", out, err, webA.Status.PodIP)
		}
		// The cluster DNS answers A and AAAA: a record of each ClusterIP,
		// at each of its own ClusterIPs, one of each family.
		want := slices.Sorted(slices.Values(svc.Spec.ClusterIPs))
		if out := srv.Kubectl(t, "exec", "web-b", "--", harness.TestImageCommand, "lookup", "web-a.default.svc.cluster.local"); out != strings.Join(want, "\n")+"\n" {
			t.Errorf("web-b looking web-a.default.svc.cluster.local up: %q, want %v", out, want)
		}
		dns, err := client.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, "kube-dns", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(dns.Spec.ClusterIPs) != families {
			t.Errorf("the kube-dns Service's ClusterIPs %v, want %d", dns.Spec.ClusterIPs, families)
		}
		for _, ip := range dns.Spec.ClusterIPs {
			if out := srv.Kubectl(t, "exec", "web-b", "--", harness.TestImageCommand, "lookup", "web-a.default.svc.cluster.local", ip); out != strings.Join(want, "\n")+"\n" {
				t.Errorf("web-b looking web-a.default.svc.cluster.local up at the cluster DNS's %s: %q, want %v", ip, out, want)
			}
		}
		for _, ip := range svc.Spec.ClusterIPs {
			if out := srv.Kubectl(t, "exec", "web-b", "--", harness.TestImageCommand, "dial", net.JoinHostPort(ip, "80")); out != "hello from web-a\n" {
				t.Errorf("web-b dialling the Service at %s: %q, want web-a's greeting", ip, out)
			}
		}
	})

	t.Run("the agent's node pulls an image only the server's node has, from it, with no registry reachable", func(t *testing.T) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "from-a-peer", Namespace: metav1.NamespaceDefault},
			Spec: corev1.PodSpec{NodeName: agentNodeName, Containers: []corev1.Container{{
				Name: "c", Image: peerImage, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"pause"},
			}}},
		}
		runPod(ctx, t, client, pod)
		defer deletePod(ctx, t, client, pod.Namespace, pod.Name)
		if out := srv.Kubectl(t, "exec", pod.Name, "--", harness.TestImageCommand, "cat", peerImageFile); out != peerImageMessage {
			t.Errorf("the image's %s: %q, want %q", peerImageFile, out, peerImageMessage)
		}
	})

	t.Run("the agent's node has its external addresses (--node-external-ip), from the cloud node controller", func(t *testing.T) {
		want := strings.Split(s.Addrs(agentExternal, agentExternal6), ",")
		harness.Eventually(t, time.Minute, "the Node lists the external addresses and is initialized", func(ctx context.Context) (bool, string) {
			n, err := client.CoreV1().Nodes().Get(ctx, agentNodeName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			var external []string
			for _, a := range n.Status.Addresses {
				if a.Type == corev1.NodeExternalIP {
					external = append(external, a.Address)
				}
			}
			return slices.Equal(external, want) && len(n.Spec.Taints) == 0 && n.Spec.ProviderID == "kubeboot://"+agentNodeName,
				fmt.Sprintf("addresses %v, taints %v, provider ID %q", n.Status.Addresses, n.Spec.Taints, n.Spec.ProviderID)
		})
	})

	t.Run("traffic in: Ingress and Gateway at every node's address", func(t *testing.T) {
		server, _ := machines(s)
		// The agent's node answers at its external addresses; the status
		// lists them IPv4 first.
		addresses := slices.Concat(strings.Split(server, ","), strings.Split(s.Addrs(agentExternal, agentExternal6), ","))
		slices.SortStableFunc(addresses, func(a, b string) int { return strings.Count(a, ":") - strings.Count(b, ":") })
		checkTrafficIn(ctx, t, srv, client, addresses, nodeName, agentNodeName)
	})

	t.Run("NetworkPolicy", func(t *testing.T) { checkNetworkPolicy(ctx, t, srv, client, webA, webB) })

	t.Run("kubectl top shows both nodes and their Pods, scraped from their kubelets", func(t *testing.T) {
		checkNodeResourceMetrics(t, srv, []string{nodeName, agentNodeName}, []string{webA.Name, webB.Name})
	})

	// Last: it restarts the server.
	t.Run("the agent's node keeps its Pods while the server is gone, and reconnects; the server's node keeps its policies throughout", func(t *testing.T) {
		// The table stays in the kernel while the server's node is down,
		// and the restarted node replaces it in one transaction.
		watch := watchIsolation(ctx, t, client, webA)
		srv = checkServerLoss(ctx, t, srv, bin, serverArgs, webB)
		missed, reads, isolated := watch(srv.MustClient(t))
		if missed > 0 || reads == 0 {
			t.Errorf("web-a was not isolated in %d of %d reads of the node's table across the restart", missed, reads)
		}
		// The restarted node follows the policies: the policy is gone.
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return !isolated(), nil
		}); err != nil {
			t.Error("web-a still isolated after its policy was deleted on the restarted server")
		}
	})
}

// checkServerLoss stops the only server: the agent's node keeps its Pods
// running and reachable, and, once the server is back, its node is Ready
// again through the agent's reconnection, the Pod never restarted. It
// returns the restarted server.
func checkServerLoss(ctx context.Context, t *testing.T, srv *harness.APIServer, bin string, args []string, pod *corev1.Pod) *harness.APIServer {
	if err := srv.Terminate(30 * time.Second); err != nil {
		t.Fatalf("stopping the server: %v", err)
	}
	// The routes flannel set stay in the kernel.
	waitHello(t, net.JoinHostPort(pod.Status.PodIP, "8080"), "hello from "+pod.Name)
	srv = harness.StartReadyServer(t, 2*time.Minute, bin, srv.DataDir, args...)
	client := srv.MustClient(t)
	restarted := metav1.NowMicro()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		lease, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, agentNodeName, metav1.GetOptions{})
		return err == nil && lease.Spec.RenewTime != nil && restarted.Before(lease.Spec.RenewTime), nil
	})
	if err != nil {
		t.Fatalf("node %s's lease not renewed after the server came back: %v", agentNodeName, err)
	}
	waitNode(ctx, t, client, agentNodeName)
	p, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.UID != pod.UID || p.Status.Phase != corev1.PodRunning || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("Pod %s after the server's return: UID %s (was %s), %s, %d restarts; want the same Pod, Running, never restarted",
			pod.Name, p.UID, pod.UID, p.Status.Phase, p.Status.ContainerStatuses[0].RestartCount)
	}
	waitHello(t, net.JoinHostPort(pod.Status.PodIP, "8080"), "hello from "+pod.Name)
	return srv
}

// waitPodNetwork waits until node name's pod network is up.
func waitPodNetwork(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && podNetworkUp(n), nil
	})
	if err != nil {
		t.Fatalf("node %s's pod network is not up: %v", name, err)
	}
}

// webPod is a Pod on node, labelled app=name, whose test container
// answers on port 8080 with command ("serve": a line over TCP; "http":
// over HTTP), ready once the port is open.
func webPod(name, node, command string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "web", Image: harness.TestImage, ImagePullPolicy: corev1.PullNever,
			Args:  []string{command, "8080"},
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1,
				ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}},
		}}},
	}
}

// runAgentMachine is TestTwoNodes's second machine: `kubeboot agent`,
// joined with the token the server's machine writes to env["token"].
// Its node has external addresses of each of the stack's families: a
// /32 and a deprecated /128 beside the node's own, so that the machine
// is reached at them but sends from its own.
func runAgentMachine(t *testing.T, env map[string]string) {
	s := harness.Stack(env["stack"])
	_, nodeIP := machines(s)
	external := s.Addrs(agentExternal, agentExternal6)
	for _, a := range strings.Split(external, ",") {
		args := []string{"addr", "add", a + "/32", "dev", "eth0"}
		if strings.Contains(a, ":") {
			args = []string{"addr", "add", a + "/128", "dev", "eth0", "nodad", "preferred_lft", "0"}
		}
		if out, err := runCommand("ip", args...); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	harness.RunAgentMachine(t, harness.AgentMachine{Server: net.JoinHostPort(s.Primary(serverMachine, serverMachine6), "6443"), TokenFile: env["token"],
		NodeName: agentNodeName, NodeIP: nodeIP, Args: []string{"--private-registry=" + writePeerRegistries(t), "--node-external-ip=" + external}})
}

// peerImage is an image of a registry that resolves nowhere, in the server
// node's air-gap images only: the agent's node pulls it from the server's
// node, through the embedded registry mirror.
const (
	peerImage        = "registry.peer.test/kubeboot/peer-only:1"
	peerImageFile    = "/peer-message"
	peerImageMessage = "from the server node's containerd"
)

// writePeerRegistries writes a registries.yaml that mirrors peerImage's
// registry, with no endpoint but the nodes' own, and returns its path.
func writePeerRegistries(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "registries.yaml")
	if err := os.WriteFile(path, []byte("mirrors:\n  registry.peer.test: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runCommand runs a command and returns its combined output.
func runCommand(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// TestAgentlessServer runs a `kubeboot server` that is not a node with
// one agent (k3s's agentless server): the server's host is not on the
// pod network, yet the API server reaches the agent's Pods, through the
// pods and services proxy subresources, and its kubelet, through the
// tunnel the agent opened to it (agenttunnel).
func TestAgentlessServer(t *testing.T) {
	bin, tokenFile, ok := startAgentMachine(t, harness.StackIPv4)
	if !ok {
		return
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	srv := harness.StartReadyServer(t, 2*time.Minute, bin, dataDir, "--bind-address", serverMachine, "--secure-port", "6443",
		"--advertise-address", serverMachine, "--service-cluster-ip-range", "10.96.0.0/16")
	harness.HandOverToken(t, dataDir, tokenFile)
	client := srv.MustClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	waitPodNetwork(ctx, t, client, agentNodeName)
	pod := runPod(ctx, t, client, webPod("web-b", agentNodeName, "http"))
	podAddr := net.JoinHostPort(pod.Status.PodIP, "8080")

	t.Run("this host is not on the pod network", func(t *testing.T) {
		if c, err := net.DialTimeout("tcp", podAddr, 2*time.Second); err == nil {
			c.Close()
			t.Fatalf("this host reached the Pod at %s directly: the test would not show the tunnel", podAddr)
		}
	})

	t.Run("the pods proxy subresource reaches the Pod", func(t *testing.T) {
		out, err := client.CoreV1().Pods(pod.Namespace).ProxyGet("http", pod.Name, "8080", "/", nil).DoRaw(ctx)
		if err != nil || string(out) != "hello from web-b\n" {
			t.Fatalf("GET pods/web-b:8080/proxy/: %q (%v), want the Pod's greeting", out, err)
		}
	})

	t.Run("the services proxy subresource reaches the Service's Pod", func(t *testing.T) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web-b", Namespace: metav1.NamespaceDefault},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web-b"},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		if _, err := client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var out []byte
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			out, err = client.CoreV1().Services(svc.Namespace).ProxyGet("http", svc.Name, "http", "/", nil).DoRaw(ctx)
			return err == nil && string(out) == "hello from web-b\n", nil
		})
		if err != nil {
			t.Fatalf("GET services/web-b:http/proxy/: %q (%v), want the Pod's greeting", out, err)
		}
	})

	t.Run("logs and exec reach the agent's kubelet", func(t *testing.T) {
		if out := srv.Kubectl(t, "logs", pod.Name); !strings.Contains(out, "serving HTTP on :8080") {
			t.Errorf("kubectl logs: %q, want the container's first line", out)
		}
		if out := srv.Kubectl(t, "exec", pod.Name, "--", harness.TestImageCommand, "echo", "through", "the", "tunnel"); out != "through the tunnel\n" {
			t.Errorf("kubectl exec: %q", out)
		}
	})
}
