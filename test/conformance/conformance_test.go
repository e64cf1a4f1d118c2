package conformance

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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
	ipv6 = flag.Bool("conformance.ipv6", false,
		"run TestConformance on an IPv6-only cluster (IPv6Only) instead of an IPv4 one")
	labels = flag.String("conformance.labels", "",
		"a ginkgo --label-filter choosing other specs than the [Conformance] ones, in parallel (with -conformance.focus: those it also matches), "+
			"e.g. 'Feature: containsAny NetworkPolicy', upstream's NetworkPolicy specs")
)

func TestMain(m *testing.M) { harness.Main(m) }

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

// TestConformance runs upstream's [Conformance] specs (CI's slice, or all
// of them with -conformance.full) on a cluster of two machines (Run):
// `kubeboot server --node` on one, `kubeboot agent` on the other, every
// image built here (BuildImages). It writes each run's junit.xml and
// e2e.log and a summary to the report directory, and fails if a spec
// failed. hack/conformance/run.sh runs the whole suite. With
// -conformance.ipv6 the cluster is IPv6-only.
func TestConformance(t *testing.T) {
	if *ipv6 {
		testConformance(t, IPv6Only)
		return
	}
	testConformance(t, ServerAndAgent)
}

// TestConformanceAgentless is TestConformance on three machines: a
// `kubeboot server` that is no node, and two agents, on one bridge. The
// server reaches webhooks, aggregated API servers and the proxy
// subresources' Pods only through the agents' tunnels.
func TestConformanceAgentless(t *testing.T) { testConformance(t, Agentless) }

func testConformance(t *testing.T, sh Shape) { Run(t, sh, build, runSpecs) }

// dualStackSliceSpecs are CI's slice of upstream's dual-stack specs, of
// seconds each: the nodes' addresses, the Pods' and host-network Pods' of
// both families, and Services of each family order. Traffic over each
// family is test/server TestTwoNodes's (the granular checks here take
// half a minute each, and go test gives the package 10 minutes).
var dualStackSliceSpecs = []string{
	"should have at least one dual-stack node",
	"should create pod, add ipv6 and ipv4 ip to pod ips",
	"should create pod, add ipv6 and ipv4 ip to host ips",
	"should create service with ipv4,v6 cluster ip",
	"should create service with ipv6,v4 cluster ip",
}

// TestDualStack runs upstream's dual-stack specs ([Feature:IPv6DualStack]
// in sig-network: CI's slice, all of them with -conformance.full, or those
// -conformance.focus matches; SCTP's need a feature the kernel module
// brings) on a dual-stack cluster of two machines (DualStack).
func TestDualStack(t *testing.T) { Run(t, DualStack, build, runDualStackSpecs) }

func runDualStackSpecs(ctx context.Context, t *testing.T, c *Cluster) {
	e := newE2ERun(t, c)
	specs := quoteAll(dualStackSliceSpecs)
	switch {
	case *focus != "":
		specs = *focus
	case *full:
		specs = ""
	}
	r := e.run(ctx, t, "dual-stack", "Feature:IPv6DualStack && !Feature:SCTPConnectivity", specs, *procs, AnySpec)
	report(t, c, map[string]Result{"dual-stack": r})
	if !*full && *focus == "" && r.Passed != len(dualStackSliceSpecs) {
		t.Errorf("dual-stack: %d specs passed, want the slice's %d", r.Passed, len(dualStackSliceSpecs))
	}
}

// quoteAll is a ginkgo --focus matching any of specs, as written.
func quoteAll(specs []string) string {
	var quoted []string
	for _, s := range specs {
		quoted = append(quoted, regexp.QuoteMeta(s))
	}
	return strings.Join(quoted, "|")
}

// build builds e2e.test and ginkgo from the module graph, and the images.
func build(ctx context.Context, t *testing.T) Artifacts {
	work := BuildDir(t, *cacheDir)
	a := Artifacts{Report: *reportDir, E2E: filepath.Join(work, "e2e.test"), Ginkgo: filepath.Join(work, "ginkgo")}
	ldflags, err := VersionLDFlags(ModuleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, args := range [][]string{
		{"test", "-c", "-ldflags=" + ldflags, "-o", a.E2E, "k8s.io/kubernetes/test/e2e"},
		{"build", "-o", a.Ginkgo, "github.com/onsi/ginkgo/v2/ginkgo"},
	} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = ModuleRoot(t)
		if err := run(cmd); err != nil {
			t.Fatal(err)
		}
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
		imagesLayout, imagesErr = BuildImages(ctx, ModuleRoot(t), filepath.Join(BuildDir(t, *cacheDir), "images"), nil, t.Logf)
		t.Logf("images built in %s", time.Since(start).Round(time.Second))
	})
	if imagesErr != nil {
		t.Fatal(imagesErr)
	}
	return imagesLayout
}

// runSpecs runs the specs the flags choose on the cluster, and writes
// the summary.
func runSpecs(ctx context.Context, t *testing.T, c *Cluster) {
	e := newE2ERun(t, c)
	results := map[string]Result{}
	switch {
	case *labels != "":
		results["labels"] = e.run(ctx, t, "labels", *labels, *focus, *procs, AnySpec)
	case *focus != "":
		results["focus"] = e.run(ctx, t, "focus", "Conformance", *focus, *procs, ConformanceSpec)
	case *full:
		results["parallel"] = e.run(ctx, t, "parallel", "Conformance && !Serial", "", *procs, ConformanceSpec)
		results["serial"] = e.run(ctx, t, "serial", "Conformance && Serial", "", 1, ConformanceSpec)
	default:
		results["slice"] = e.run(ctx, t, "slice", "Conformance", quoteAll(sliceSpecs), *procs, ConformanceSpec)
	}
	report(t, c, results)
	if r, ok := results["slice"]; ok && r.Passed != len(sliceSpecs) {
		t.Errorf("slice: %d specs passed, want the slice's %d", r.Passed, len(sliceSpecs))
	}
}

// report writes the runs' summary and fails the test for each run with
// a failed spec.
func report(t *testing.T, c *Cluster, results map[string]Result) {
	var summary bytes.Buffer
	WriteSummary(&summary, results)
	if err := os.WriteFile(filepath.Join(c.Report, "summary.md"), summary.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, r := range results {
		if r.Failed > 0 {
			t.Errorf("%s: %d of %d specs failed (reports in %s)", name, r.Failed, r.Failed+r.Passed, c.Report)
		}
	}
}

// e2eRun runs e2e.test through ginkgo on the cluster.
type e2eRun struct {
	a                   Artifacts
	kubeconfig, kubectl string
}

func newE2ERun(t *testing.T, c *Cluster) e2eRun {
	kubectl, err := harness.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	return e2eRun{a: c.Artifacts, kubeconfig: c.Kubeconfig, kubectl: kubectl}
}

// run runs the specs labelFilter and focus select with procs parallel
// processes, its report in a directory of the report directory named
// name, and returns its result, counting the specs counts says.
func (e e2eRun) run(ctx context.Context, t *testing.T, name, labelFilter, focus string, procs int, counts func(string) bool) Result {
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
	r, err := ReadResult(filepath.Join(dir, "junit.xml"), counts)
	if err != nil {
		t.Fatalf("%s run (%v): no report: %v; see %s", name, runErr, err, log.Name())
	}
	t.Logf("%s run: %d passed, %d failed, %d skipped in %s", name, r.Passed, r.Failed, r.Skipped, time.Since(start).Round(time.Second))
	return r
}
