package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	nodeutil "k8s.io/component-helpers/node/util"

	"github.com/kubeboot/kubeboot/test/harness"
)

var (
	full = flag.Bool("conformance.full", false,
		"run every [Conformance] spec: the parallel ones, then the [Serial] ones alone (default: CI's slice, a few minutes)")
	reportDir = flag.String("conformance.report", "",
		"directory for each run's junit.xml and e2e.log and the summary (default: the test's temporary directory, removed after)")
	cacheDir = flag.String("conformance.cache", "",
		"directory keeping the build (Debian's packages, the programs) between runs (default: the test's temporary directory)")
	procs = flag.Int("conformance.procs", 4, "ginkgo's parallel processes for the non-[Serial] specs")
	focus = flag.String("conformance.focus", "",
		"a ginkgo --focus regexp choosing among the [Conformance] specs, instead of the slice or -conformance.full's all")
	labels = flag.String("conformance.labels", "",
		"a ginkgo --label-filter choosing other specs than the [Conformance] ones, in parallel (with -conformance.focus: those it also matches), "+
			"e.g. 'Feature: containsAny NetworkPolicy', upstream's NetworkPolicy specs")
	netpol = flag.String("conformance.netpol", "",
		"cyclonus's generated NetworkPolicy cases to run after the specs (alone, without -conformance.focus, -labels or -full): "+
			"'ci' (CI's slice, run after CI's slice of specs when no flag chooses), 'all' (every case this kernel can run), 'none', "+
			"or a comma-separated list of cyclonus's tags, and of tags after a '-' whose cases are left out (all,-multi-peer)")
)

func TestMain(m *testing.M) { harness.Main(m) }

// The machines: the server's, which serves the images at registryPort,
// and the agents', each a node.
const (
	serverMachine = "198.51.100.1"
	registryPort  = "5000"
)

// shape is how the cluster's machines are laid out.
type shape struct {
	// serverNode, if set, is the server's node's name: `server --node`.
	serverNode string
	// agents are the agents' machines, on a veth pair each.
	agents []machine
}

// machine is an agent's machine: its address and its node's name.
type machine struct{ ip, node string }

var (
	// serverAndAgent is `kubeboot server --node` and one agent, as kind's
	// and k3s's conformance jobs run.
	serverAndAgent = shape{serverNode: "node-a", agents: []machine{{"198.51.100.2", "node-b"}}}
	// agentless is a `kubeboot server` that is no node and two agents
	// (k3s's agentless server): the server is not on the pod network and
	// reaches Pods through its agents' tunnels.
	agentless = shape{agents: []machine{{"198.51.100.2", "node-a"}, {"198.51.100.3", "node-b"}}}
)

// nodes are the cluster's nodes.
func (s shape) nodes() []string {
	var nodes []string
	if s.serverNode != "" {
		nodes = append(nodes, s.serverNode)
	}
	for _, m := range s.agents {
		nodes = append(nodes, m.node)
	}
	return nodes
}

// sliceSpecs are CI's slice: specs of a few seconds to a minute that cross
// what a cluster must get right together — Pods on both nodes, volumes
// and environment from the API (names no shell would take), sysctls, a
// read-only root filesystem, images pulled from the registry, DNS for
// Services (over UDP and TCP, musl's and glibc's resolvers), a Service's
// endpoints, discovery, an admission webhook and an aggregated API server
// each backed by a Pod.
var sliceSpecs = []string{
	"[sig-node] Pods should be submitted and removed",
	"[sig-storage] ConfigMap should be consumable from pods in volume [Conformance]",
	"[sig-storage] Downward API volume should provide podname only",
	"[sig-node] Secrets should be consumable via the environment",
	"[sig-node] Kubelet when scheduling a read only busybox container should not write to root filesystem",
	"[sig-node] Sysctls [LinuxOnly] should support sysctls",
	"[sig-network] DNS should provide DNS for services",
	"[sig-network] Services should serve a basic endpoint from pods",
	"[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] should be able to deny pod and configmap creation",
	"[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] should include webhook resources in discovery documents",
	"[sig-api-machinery] Aggregator Should be able to support the 1.17 Sample API Server using the current Aggregator",
}

// artifactsEnv carries what the test built outside the network namespace
// (which has no network) to the machines.
const artifactsEnv = "KUBEBOOT_CONFORMANCE"

// artifacts are the run's programs, images and report directory.
type artifacts struct {
	E2E, Ginkgo, Cyclonus, Layout, Report string
}

// TestConformance runs upstream's [Conformance] specs (CI's slice, or all
// of them with -conformance.full) on a cluster of two machines, each a
// network and mount namespace with kubeboot's embedded containerd:
// `kubeboot server --node` on one, `kubeboot agent` on the other, both
// nodes schedulable, each with cgroups of its own as a node on a host of
// its own has (harness.NodeCgroups), every image built here (BuildImages) and served from
// a registry on the server's machine that both nodes mirror
// registry.k8s.io to. It writes each run's junit.xml and e2e.log and a
// summary to the report directory, and fails if a spec failed.
// hack/conformance/run.sh runs the whole suite.
func TestConformance(t *testing.T) { testConformance(t, serverAndAgent) }

// TestConformanceAgentless is TestConformance on three machines: a
// `kubeboot server` that is no node, and two agents, on one bridge. The
// server reaches webhooks, aggregated API servers and the proxy
// subresources' Pods only through the agents' tunnels.
func TestConformanceAgentless(t *testing.T) { testConformance(t, agentless) }

func testConformance(t *testing.T, sh shape) {
	// Interrupted (^C reaches every process of the run; SIGTERM reaches a
	// machine whose parent died), each process stops what it started and
	// runs its cleanups, which stop the containers and detach their
	// mounts: nothing outlives the run.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if env, ok := harness.InMachine(); ok {
		args := append([]string{"--private-registry=" + env["registries"]}, harness.NodeCgroups(t, env["node"])...)
		harness.RunAgentMachine(t, harness.AgentMachine{Server: net.JoinHostPort(serverMachine, "6443"), TokenFile: env["token"],
			NodeName: env["node"], NodeIP: env["ip"], Args: args})
		return
	}
	var a artifacts
	if env := os.Getenv(artifactsEnv); env != "" {
		if err := json.Unmarshal([]byte(env), &a); err != nil {
			t.Fatal(err)
		}
	} else {
		requireTools(t)
		harness.RequireContainerd(t)
		a = build(ctx, t, sh)
		b, _ := json.Marshal(a)
		t.Setenv(artifactsEnv, string(b))
	}
	if !harness.InNetNS(t) {
		if summary, err := os.ReadFile(filepath.Join(a.Report, "summary.md")); err == nil {
			t.Logf("summary (%s):\n%s", a.Report, summary)
		}
		return
	}
	runCluster(ctx, t, a, sh)
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

// build builds e2e.test and ginkgo from the module graph, the images, and
// the runner of cyclonus's cases if sh runs any.
func build(ctx context.Context, t *testing.T, sh shape) artifacts {
	t.Helper()
	work := workDir(t)
	a := artifacts{Report: *reportDir, E2E: filepath.Join(work, "e2e.test"), Ginkgo: filepath.Join(work, "ginkgo")}
	if a.Report == "" {
		a.Report = t.TempDir()
	}
	if err := os.MkdirAll(a.Report, 0o755); err != nil {
		t.Fatal(err)
	}
	ldflags, err := VersionLDFlags(moduleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, args := range [][]string{
		{"test", "-c", "-ldflags=" + ldflags, "-o", a.E2E, "k8s.io/kubernetes/test/e2e"},
		{"build", "-o", a.Ginkgo, "github.com/onsi/ginkgo/v2/ginkgo"},
	} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = moduleRoot(t)
		if err := run(cmd); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := netpolCases(sh); ok {
		a.Cyclonus = buildCyclonus(ctx, t, work)
	}
	t.Logf("e2e.test and ginkgo built in %s", time.Since(start).Round(time.Second))
	a.Layout = builtImages(ctx, t)
	return a
}

var (
	imagesOnce   sync.Once
	imagesLayout string
	imagesErr    error
)

// builtImages builds the images once for the test binary's tests, and
// returns their layout.
func builtImages(ctx context.Context, t *testing.T) string {
	t.Helper()
	imagesOnce.Do(func() {
		start := time.Now()
		imagesLayout, imagesErr = BuildImages(ctx, moduleRoot(t), filepath.Join(workDir(t), "images"), t.Logf)
		t.Logf("images built in %s", time.Since(start).Round(time.Second))
	})
	if imagesErr != nil {
		t.Fatal(imagesErr)
	}
	return imagesLayout
}

// workDir is where the build goes: -conformance.cache, or a directory of
// the test binary's, removed after its tests.
func workDir(t *testing.T) string {
	t.Helper()
	dir, err := work()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

var work = sync.OnceValues(func() (string, error) {
	if *cacheDir != "" {
		return *cacheDir, nil
	}
	return harness.ScratchDir()
})

// runCluster is the server's machine: the registry, the cluster, then the
// suite.
func runCluster(ctx context.Context, t *testing.T, a artifacts, sh shape) {
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	registries := filepath.Join(t.TempDir(), "registries.yaml")
	var mirror strings.Builder
	mirror.WriteString("mirrors:\n")
	for _, r := range []string{"registry.k8s.io", "docker.io"} {
		fmt.Fprintf(&mirror, "  %s:\n    endpoint:\n      - http://%s\n", r, net.JoinHostPort(serverMachine, registryPort))
	}
	if err := os.WriteFile(registries, []byte(mirror.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	env := func(m machine) map[string]string {
		return map[string]string{"token": tokenFile, "registries": registries, "node": m.node, "ip": m.ip}
	}
	if len(sh.agents) == 1 {
		harness.StartMachine(t, "eth0", serverMachine, sh.agents[0].ip, env(sh.agents[0]))
	} else {
		harness.Bridge(t, "br0", serverMachine)
		for i, m := range sh.agents {
			harness.StartMachineOn(t, "br0", fmt.Sprintf("veth%d", i), m.ip, env(m))
		}
	}
	if sh.serverNode != "" {
		// This host reaches Services' cluster IPs (kube-proxy's DNAT) by
		// the pod network's side, as the machine has no default route.
		if out, err := exec.Command("ip", "route", "add", "10.96.0.0/16", "dev", "eth0", "src", serverMachine).CombinedOutput(); err != nil {
			t.Fatalf("ip route add: %v: %s", err, out)
		}
	}

	l, err := net.Listen("tcp", net.JoinHostPort(serverMachine, registryPort))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	start := time.Now()
	if err := ServeImages(ctx, l, a.Layout, t.TempDir()); err != nil {
		t.Fatalf("serving the images: %v", err)
	}
	t.Logf("registry at %s serves %d images (%s)", l.Addr(), len(Images()), time.Since(start).Round(time.Second))

	dataDir := filepath.Join(t.TempDir(), "data")
	args := []string{"--bind-address", serverMachine, "--secure-port", "6443", "--service-cluster-ip-range", "10.96.0.0/16",
		"--advertise-address", serverMachine}
	if sh.serverNode != "" {
		// First, so that its cgroups are removed after the containers in
		// them are killed (cleanups run last first).
		cgroups := harness.NodeCgroups(t, sh.serverNode)
		// The node's sandbox image is kubeboot's default, pulled from the
		// registry as every image is: EmbeddedContainerd's test images
		// and pause are not used.
		_ = harness.EmbeddedContainerd(t, harness.NodeDir(dataDir))
		args = append(harness.NodeServerArgs(t, serverMachine, ""), "--kubelet-arg=--hostname-override="+sh.serverNode,
			"--advertise-address", serverMachine, "--private-registry="+registries)
		args = append(args, cgroups...)
	}
	srv := harness.StartReadyServer(t, 2*time.Minute, bin, dataDir, args...)
	harness.HandOverToken(t, dataDir, tokenFile)
	client := srv.MustClient(t)
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range sh.nodes() {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !ready(n) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("nodes %s not Ready: %v", strings.Join(sh.nodes(), " and "), err)
	}
	t.Logf("cluster of nodes %s Ready (%s after the registry)", strings.Join(sh.nodes(), " and "), time.Since(start).Round(time.Second))

	kubectl, err := harness.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	e := e2eRun{a: a, kubeconfig: filepath.Join(dataDir, "admin.kubeconfig"), kubectl: kubectl}
	results := map[string]Result{}
	switch {
	case *labels != "":
		results["labels"] = e.run(ctx, t, "labels", *labels, *focus, *procs)
	case *focus != "":
		results["focus"] = e.run(ctx, t, "focus", "Conformance", *focus, *procs)
	case *full:
		results["parallel"] = e.run(ctx, t, "parallel", "Conformance && !Serial", "", *procs)
		results["serial"] = e.run(ctx, t, "serial", "Conformance && Serial", "", 1)
	case *netpol != "":
		// Only the generated cases.
	default:
		var quoted []string
		for _, s := range sliceSpecs {
			quoted = append(quoted, regexp.QuoteMeta(s))
		}
		results["slice"] = e.run(ctx, t, "slice", "Conformance", strings.Join(quoted, "|"), *procs)
	}
	if sel, ok := netpolCases(sh); ok {
		results["netpol"] = runCyclonus(ctx, t, a, e.kubeconfig, sel)
	}
	var summary bytes.Buffer
	WriteSummary(&summary, results)
	if err := os.WriteFile(filepath.Join(a.Report, "summary.md"), summary.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, r := range results {
		if r.Failed > 0 {
			t.Errorf("%s: %d of %d specs failed (reports in %s)", name, r.Failed, r.Failed+r.Passed, a.Report)
		}
		if name == "slice" && r.Passed != len(sliceSpecs) {
			t.Errorf("%s: %d specs passed, want the slice's %d", name, r.Passed, len(sliceSpecs))
		}
	}
}

// e2eRun runs e2e.test through ginkgo on the cluster.
type e2eRun struct {
	a                   artifacts
	kubeconfig, kubectl string
}

// run runs the specs labelFilter and focus select with procs parallel
// processes, its report in a directory of the report directory named
// name, and returns its result.
func (e e2eRun) run(ctx context.Context, t *testing.T, name, labelFilter, focus string, procs int) Result {
	t.Helper()
	dir := filepath.Join(e.a.Report, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "e2e.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	args := []string{"--procs=" + strconv.Itoa(procs), "--timeout=24h", "--no-color", "--silence-skips", "-v",
		"--output-dir=" + dir, "--junit-report=junit.xml", "--label-filter=" + labelFilter}
	if focus != "" {
		args = append(args, "--focus="+focus)
	}
	args = append(args, e.a.E2E, "--", "--provider=skeleton", "--kubeconfig="+e.kubeconfig, "--num-nodes=2",
		"--kubectl-path="+e.kubectl, "--report-dir="+dir)
	cmd := exec.CommandContext(ctx, e.a.Ginkgo, args...)
	// Interrupted, ginkgo stops the specs and writes its report.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 2 * time.Minute
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	start := time.Now()
	// ginkgo exits non-zero when a spec fails: the report says which.
	runErr := cmd.Run()
	counts := ConformanceSpec
	if *labels != "" {
		counts = AnySpec
	}
	r, err := ReadResult(filepath.Join(dir, "junit.xml"), counts)
	if err != nil {
		t.Fatalf("%s run (%v): no report: %v; see %s", name, runErr, err, log.Name())
	}
	t.Logf("%s run: %d passed, %d failed, %d skipped in %s", name, r.Passed, r.Failed, r.Skipped, time.Since(start).Round(time.Second))
	return r
}

func ready(n *corev1.Node) bool {
	_, c := nodeutil.GetNodeCondition(&n.Status, corev1.NodeReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := harness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
