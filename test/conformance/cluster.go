package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	nodeutil "k8s.io/component-helpers/node/util"

	"github.com/kubeboot/kubeboot/test/harness"
)

// The machines: the server's, which serves the images at registryPort,
// and the agents', each a node; the server's IPv6 address where the
// cluster has IPv6.
const (
	serverMachine  = "198.51.100.1"
	serverMachine6 = "2001:db8::1"
	registryPort   = "5000"
)

// Shape is how a cluster's machines are laid out.
type Shape struct {
	// ServerNode, if set, is the server's node's name: `server --node`.
	ServerNode string
	// Agents are the agents' machines, on a veth pair each, with the
	// addresses of Stack's families.
	Agents []Machine
	// ServerArgs are the server's flags besides the run's own.
	ServerArgs []string
	// Stack is the cluster's IP families; "": IPv4.
	Stack harness.Stack
}

// Machine is an agent's machine: its IPv4 and IPv6 addresses (those of
// its cluster's families) and its node's name.
type Machine struct{ IP, IP6, Node string }

// addrs are the machine's addresses as --node-ip takes them, IPv4 first.
func (m Machine) addrs() string {
	var addrs []string
	for _, a := range []string{m.IP, m.IP6} {
		if a != "" {
			addrs = append(addrs, a)
		}
	}
	return strings.Join(addrs, ",")
}

// primary is the machine's address of its cluster's primary family.
func (m Machine) primary() string {
	if m.IP != "" {
		return m.IP
	}
	return m.IP6
}

var (
	// ServerAndAgent is `kubeboot server --node` and one agent, as kind's
	// and k3s's conformance jobs run.
	ServerAndAgent = Shape{ServerNode: "node-a", Agents: []Machine{{IP: "198.51.100.2", Node: "node-b"}}}
	// Agentless is a `kubeboot server` that is no node and two agents
	// (k3s's agentless server): the server is not on the pod network and
	// reaches Pods through its agents' tunnels.
	Agentless = Shape{Agents: []Machine{{IP: "198.51.100.2", Node: "node-a"}, {IP: "198.51.100.3", Node: "node-b"}}}
	// DualStack is ServerAndAgent on a dual-stack cluster.
	DualStack = Shape{ServerNode: "node-a", Agents: []Machine{{IP: "198.51.100.2", IP6: "2001:db8::2", Node: "node-b"}}, Stack: harness.StackDual}
	// IPv6Only is ServerAndAgent on an IPv6-only cluster.
	IPv6Only = Shape{ServerNode: "node-a", Agents: []Machine{{IP6: "2001:db8::2", Node: "node-b"}}, Stack: harness.StackIPv6}
)

// stack is the cluster's IP families.
func (s Shape) stack() harness.Stack {
	if s.Stack == "" {
		return harness.StackIPv4
	}
	return s.Stack
}

// server is the server's machine.
func (s Shape) server() Machine {
	m := Machine{Node: s.ServerNode}
	if s.stack() != harness.StackIPv6 {
		m.IP = serverMachine
	}
	if s.stack() != harness.StackIPv4 {
		m.IP6 = serverMachine6
	}
	return m
}

// Nodes are the cluster's nodes.
func (s Shape) Nodes() []string {
	var nodes []string
	if s.ServerNode != "" {
		nodes = append(nodes, s.ServerNode)
	}
	for _, m := range s.Agents {
		nodes = append(nodes, m.Node)
	}
	return nodes
}

// Artifacts are what a run built outside the network namespace, which
// has no network, for its machines: programs (those the run needs), the
// images' OCI layout (BuildImages) and the report directory.
type Artifacts struct {
	E2E, Ginkgo, Cyclonus, Layout, Report string
}

// artifactsEnv carries the Artifacts to the processes of the network
// namespace.
const artifactsEnv = "KUBEBOOT_CONFORMANCE"

// Cluster is a running cluster of a Shape, for a Run's body.
type Cluster struct {
	Artifacts
	// Kubeconfig is the cluster admin's.
	Kubeconfig string
	Client     kubernetes.Interface
}

// Run runs body on a cluster of shape sh, each machine a network and
// mount namespace with kubeboot's embedded containerd, every node
// schedulable and with cgroups of its own as a node on a host of its own
// has (harness.NodeCgroups), the images served from a registry on the
// server's machine that the nodes mirror registry.k8s.io and docker.io
// to.
//
// The test runs in several processes. The first calls build (outside any
// namespace: the build fetches Debian's packages and modules) and runs
// the test again in a network namespace, where the server's machine
// starts the registry, the agents' machines (the test run again as each)
// and the server, waits for the nodes to be Ready and calls body. The
// first then logs the report directory's summary.md, if body wrote one.
//
// Interrupted (^C reaches every process of the run; SIGTERM reaches a
// machine whose parent died), each process stops what it started and
// runs its cleanups, which stop the containers and detach their mounts:
// nothing outlives the run.
func Run(t *testing.T, sh Shape, build func(context.Context, *testing.T) Artifacts, body func(context.Context, *testing.T, *Cluster)) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if env, ok := harness.InMachine(); ok {
		args := append([]string{"--private-registry=" + env["registries"]}, harness.NodeCgroups(t, env["node"])...)
		m := Machine{IP: env["ip"], IP6: env["ip6"], Node: env["node"]}
		harness.RunAgentMachine(t, harness.AgentMachine{Server: net.JoinHostPort(env["server"], "6443"), TokenFile: env["token"],
			NodeName: m.Node, NodeIP: m.addrs(), Args: args, Routes: harness.Stack(env["stack"]).ServiceCIDRs()})
		return
	}
	var a Artifacts
	if env := os.Getenv(artifactsEnv); env != "" {
		if err := json.Unmarshal([]byte(env), &a); err != nil {
			t.Fatal(err)
		}
	} else {
		requireTools(t)
		harness.RequireContainerd(t)
		a = build(ctx, t)
		if a.Report == "" {
			a.Report = t.TempDir()
		}
		if err := os.MkdirAll(a.Report, 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(a)
		t.Setenv(artifactsEnv, string(b))
	}
	if !harness.InNetNS(t) {
		if summary, err := os.ReadFile(filepath.Join(a.Report, "summary.md")); err == nil {
			t.Logf("summary (%s):\n%s", a.Report, summary)
		}
		return
	}
	body(ctx, t, startCluster(ctx, t, a, sh))
}

// requireTools names the programs the run needs that the host lacks (runc
// and the CNI plugins are harness.RequireContainerd's).
func requireTools(t *testing.T) {
	t.Helper()
	var missing []string
	for _, tool := range []string{"unshare", "ip", "nft", "gcc", "make", "apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the conformance run needs %s (Debian: apt-get install util-linux iproute2 nftables gcc make libc6-dev)", strings.Join(missing, ", "))
	}
}

// startCluster is the server's machine: the registry, the agents'
// machines, the server, then the nodes Ready.
func startCluster(ctx context.Context, t *testing.T, a Artifacts, sh Shape) *Cluster {
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	server := sh.server()
	registries := filepath.Join(t.TempDir(), "registries.yaml")
	var mirror strings.Builder
	mirror.WriteString("mirrors:\n")
	for _, r := range []string{"registry.k8s.io", "docker.io"} {
		fmt.Fprintf(&mirror, "  %s:\n    endpoint:\n      - http://%s\n", r, net.JoinHostPort(server.primary(), registryPort))
	}
	if err := os.WriteFile(registries, []byte(mirror.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	env := func(m Machine) map[string]string {
		return map[string]string{"token": tokenFile, "registries": registries, "node": m.Node, "ip": m.IP, "ip6": m.IP6,
			"server": server.primary(), "stack": string(sh.stack())}
	}
	if len(sh.Agents) == 1 {
		harness.StartMachine(t, "eth0", server.addrs(), sh.Agents[0].addrs(), env(sh.Agents[0]))
	} else {
		harness.Bridge(t, "br0", server.addrs())
		for i, m := range sh.Agents {
			harness.StartMachineOn(t, "br0", fmt.Sprintf("veth%d", i), m.addrs(), env(m))
		}
	}
	if sh.ServerNode != "" {
		// This host reaches Services' cluster IPs (kube-proxy's DNAT) by
		// the pod network's side, as the machine has no default route.
		harness.RouteOut(t, "eth0", sh.stack().ServiceCIDRs())
	}

	l, err := net.Listen("tcp", net.JoinHostPort(server.primary(), registryPort))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	start := time.Now()
	served, err := ServeImages(ctx, l, a.Layout, t.TempDir())
	if err != nil {
		t.Fatalf("serving the images: %v", err)
	}
	t.Logf("registry at %s serves %d images (%s)", l.Addr(), served, time.Since(start).Round(time.Second))

	dataDir := filepath.Join(t.TempDir(), "data")
	args := []string{"--bind-address", server.primary(), "--secure-port", "6443",
		"--service-cluster-ip-range", strings.Join(sh.stack().ServiceCIDRs(), ","), "--advertise-address", server.primary()}
	if sh.ServerNode != "" {
		// First, so that its cgroups are removed after the containers in
		// them are killed (cleanups run last first).
		cgroups := harness.NodeCgroups(t, sh.ServerNode)
		// The node's sandbox image is kubeboot's default, pulled from the
		// registry as every image is: EmbeddedContainerd's test images
		// and pause are not used.
		_ = harness.EmbeddedContainerd(t, harness.NodeDir(dataDir))
		args = append(harness.NodeServerArgs(t, server.primary(), ""), "--kubelet-arg=--hostname-override="+sh.ServerNode,
			"--advertise-address", server.primary(), "--private-registry="+registries, "--node-ip="+server.addrs(),
			"--service-cluster-ip-range="+strings.Join(sh.stack().ServiceCIDRs(), ","))
		args = append(args, cgroups...)
	}
	if cidrs := sh.stack().ClusterCIDR(); cidrs != "" {
		args = append(args, "--cluster-cidr="+cidrs)
	}
	srv := harness.StartReadyServer(t, 2*time.Minute, bin, dataDir, append(args, sh.ServerArgs...)...)
	harness.HandOverToken(t, dataDir, tokenFile)
	client := srv.MustClient(t)
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range sh.Nodes() {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !ready(n) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("nodes %s not Ready: %v", strings.Join(sh.Nodes(), " and "), err)
	}
	t.Logf("cluster of nodes %s Ready (%s after the registry)", strings.Join(sh.Nodes(), " and "), time.Since(start).Round(time.Second))
	return &Cluster{Artifacts: a, Kubeconfig: filepath.Join(dataDir, "admin.kubeconfig"), Client: client}
}

func ready(n *corev1.Node) bool {
	_, c := nodeutil.GetNodeCondition(&n.Status, corev1.NodeReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

// BuildDir is where a test binary's build goes: cache if set (kept
// between runs), else a directory of the binary's, removed after its
// tests.
func BuildDir(t *testing.T, cache string) string {
	t.Helper()
	if cache != "" {
		return cache
	}
	dir, err := scratch()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

var scratch = sync.OnceValues(harness.ScratchDir)

// ModuleRoot is the kubeboot module's root directory.
func ModuleRoot(t *testing.T) string {
	t.Helper()
	root, err := harness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
