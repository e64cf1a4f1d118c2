// Package netpol runs cyclonus's generated NetworkPolicy cases
// (github.com/mattfenwick/cyclonus v0.5.6: the policies, the changes to
// Pods, Namespaces and labels, and the reachability upstream's semantics
// give, computed by cyclonus's matcher) on a two-node kubeboot cluster of
// network namespaces, `server --node` and an agent, its images built on
// the machine (test/conformance's Run and BuildImages).
package netpol

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/test/conformance"
	"github.com/kubeboot/kubeboot/test/harness"
)

var (
	cases = flag.String("netpol.cases", "ci",
		"the cases to run: 'ci' (CI's slice, a few minutes), 'all' (every case this kernel can run), "+
			"or a comma-separated list of cyclonus's tags, and of tags after a '-' whose cases are left out (all,-multi-peer)")
	reportDir = flag.String("netpol.report", "",
		"directory for cyclonus's output, its JUnit report and the summary (default: the test's temporary directory, removed after)")
	cacheDir = flag.String("netpol.cache", "",
		"directory keeping the build (Debian's packages, the programs) between runs (default: the test's temporary directory)")
)

func TestMain(m *testing.M) { harness.Main(m) }

// cluster is conformance.ServerAndAgent's shape, its nodes named apart
// from the conformance tests' (the nodes' cgroup roots are named after
// them: harness.NodeCgroups), whose package go test may run at the same
// time.
var cluster = conformance.Shape{ServerNode: "netpol-a", Agents: []conformance.Machine{{IP: "198.51.100.2", Node: "netpol-b"}}}

// ciCases are CI's slice, by description: every kind of rule the
// dataplane writes, each way a policy and its Pods change, and upstream's
// specs' shapes, a few minutes in all. A description may name two cases
// (an ingress and an egress one); both run. The cases that deny DNS are
// left out: each denied lookup waits out the resolver's timeouts.
var ciCases = []string{
	// Policies, Pods, Namespaces and labels changed under the policies.
	"Create/delete policy",
	"Create/update policy",
	"Create/delete pod",
	"Update namespace so that policy applies, then again so it no longer applies",
	"Update pod so that policy applies, then again so it no longer applies",
	// Policies in conflict: a deny and an allow of one source, on either
	// end.
	"deny all by IP + allow all by pod from same source",
	"allow all from source, deny all to dest",
	// Peers: Pods and Namespaces by labels, nil and empty selectors, the
	// namespace's default label, ipBlocks with and without exceptions,
	// together in one rule.
	"egress, 2-peer: pods by label + ns by label, simple ipblock",
	"ingress, 2-peer: pods by label + ns by label, ipblock with except",
	"ingress, 2-peer: empty pods + nil ns, pods by label + ns by label",
	"egress, 2-peer: empty pods + ns by label, ipblock with except",
	"ingress, 2-peer: simple ipblock, ipblock with except",
	"ingress: select namespace by default label",
	"egress: empty peers",
	// Ports: ranges; named and numbered ones of both protocols in one
	// rule; a protocol without a port.
	"direction,egress,end-port,numbered-port,port,protocol,tcp",
	"direction,ingress,multi-port/protocol,named-port,numbered-port,port,protocol,rule,udp",
	"any-port,direction,egress,port,protocol,udp",
	// Default deny.
	"ingress: deny all",
	// A policy's target by a selector's expression.
	`set pod selector to ["MatchLabels",[],"MatchExpression",[{"key":"pod","operator":"In","values":["a","b"]}]]`,
	// Upstream's specs as cases.
	"should support a 'default-deny-all' policy",
	"should enforce multiple, stacked policies with overlapping podSelectors [Feature:NetworkPolicy]",
	"should work with Ingress, Egress specified together",
}

// TestCyclonus runs the cases -netpol.cases selects, and fails if one
// failed: a case passes when every probe of every step (each pair of the
// 9 Pods, on each port and protocol, through their Services' names) saw
// what cyclonus's matcher computed. hack/conformance/run.sh runs it with
// NETPOL= (NETPOL=all: every case).
func TestCyclonus(t *testing.T) {
	sel := conformance.CasesNamed(ciCases)
	if *cases != "ci" {
		sel = conformance.ParseNetpolSelection(*cases)
	}
	conformance.Run(t, cluster, build, func(ctx context.Context, t *testing.T, c *conformance.Cluster) {
		r := conformance.RunCyclonus(ctx, t, c, sel)
		var summary bytes.Buffer
		conformance.WriteSummary(&summary, map[string]conformance.Result{"netpol": r})
		if err := os.WriteFile(filepath.Join(c.Report, "summary.md"), summary.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if r.Failed > 0 {
			t.Errorf("%d of %d cases failed (cyclonus's tables in %s)", r.Failed, r.Failed+r.Passed, c.Report)
		}
	})
}

// build builds cyclonus's runner and the images its cases run.
func build(ctx context.Context, t *testing.T) conformance.Artifacts {
	work := conformance.BuildDir(t, *cacheDir)
	start := time.Now()
	a := conformance.Artifacts{Report: *reportDir, Cyclonus: conformance.BuildCyclonus(ctx, t, work)}
	if *cases == "ci" {
		checkCISlice(ctx, t, a.Cyclonus)
	}
	layout, err := conformance.BuildImages(ctx, conformance.ModuleRoot(t), filepath.Join(work, "images"), conformance.CyclonusImages, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	a.Layout = layout
	t.Logf("cyclonus's runner and its images built in %s", time.Since(start).Round(time.Second))
	return a
}

// checkCISlice fails the test if a description of ciCases names none of
// the cases the runner at bin generates (a case renamed by a newer
// cyclonus would otherwise drop out of CI silently).
func checkCISlice(ctx context.Context, t *testing.T, bin string) {
	t.Helper()
	generated, err := conformance.CyclonusCases(ctx, bin, conformance.CasesNamed(ciCases))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ciCases {
		if !slices.Contains(generated, d) {
			t.Errorf("CI's case %q is not one cyclonus generates", d)
		}
	}
	t.Logf("CI's slice: %d cases", len(generated))
}
