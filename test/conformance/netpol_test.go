package conformance

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The NetworkPolicy cases after the specs are cyclonus's
// (github.com/mattfenwick/cyclonus): for each generated case it applies
// the policies to Pods x/a..z/c (9 Pods in 3 namespaces, spread over the
// nodes), computes the reachability upstream's semantics give with its
// own matcher, and probes every pair of Pods on each port and protocol,
// through their Services' names. Our runner of them (CyclonusDir) is a
// module of its own (docs/decisions.md).

// ciNetpolCases are CI's slice of the generated cases, by description,
// a few minutes' worth: egress to Pods by labels and to an ipBlock (each
// probe resolving Services' names through the cluster DNS, which the
// policies allow by port 53), a deny by address against an allow by Pod
// for the same source, and a Pod's labels changed under a policy and
// back, each probed.
var ciNetpolCases = []string{
	"egress, 2-peer: pods by label + ns by label, simple ipblock",
	"deny all by IP + allow all by pod from same source",
	"Update pod so that policy applies, then again so it no longer applies",
}

// netpolExcluded are the tags never run: SCTP, which this kernel lacks.
var netpolExcluded = []string{"sctp"}

// netpolSelection is the generated cases -conformance.netpol selects:
// those with any of include's tags (all, if none) and none of exclude's,
// whose description focus matches.
type netpolSelection struct {
	include, exclude []string
	focus            string
}

// netpolCases are the generated cases -conformance.netpol selects on a
// cluster of shape sh, and whether to run any. Without the flag, CI's
// slice runs on the `server --node` shape only: the package's tests share
// go test's 10 minutes.
func netpolCases(sh shape) (netpolSelection, bool) {
	switch *netpol {
	case "none":
		return netpolSelection{}, false
	case "":
		if *focus != "" || *labels != "" || *full || sh.serverNode == "" {
			return netpolSelection{}, false
		}
		fallthrough
	case "ci":
		var quoted []string
		for _, d := range ciNetpolCases {
			quoted = append(quoted, regexp.QuoteMeta(d))
		}
		return netpolSelection{focus: "^(" + strings.Join(quoted, "|") + ")$"}, true
	}
	// all, or cyclonus's tags, each with a "-" before it to leave out the
	// cases it tags.
	var sel netpolSelection
	for _, tag := range strings.Split(*netpol, ",") {
		if t, ok := strings.CutPrefix(tag, "-"); ok {
			sel.exclude = append(sel.exclude, t)
		} else if tag != "all" {
			sel.include = append(sel.include, tag)
		}
	}
	return sel, true
}

// buildCyclonus builds the cases' runner into dir's bin.
func buildCyclonus(ctx context.Context, t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "bin", "cyclonus")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
	cmd.Dir = filepath.Join(moduleRoot(t), CyclonusDir)
	if err := run(cmd); err != nil {
		t.Fatalf("building cyclonus's runner: %v", err)
	}
	return out
}

// cyclonusCases is the line of cyclonus's output that gives how many
// cases it runs.
var cyclonusCases = regexp.MustCompile(`(?m)^testing (\d+) cases$`)

// runCyclonus runs the generated cases sel selects on the cluster, its output and JUnit report in the report
// directory's netpol, and returns its result: a case passes when every
// probe of every step saw what cyclonus's matcher computed.
func runCyclonus(ctx context.Context, t *testing.T, a artifacts, kubeconfig string, sel netpolSelection) Result {
	t.Helper()
	dir := filepath.Join(a.Report, "netpol")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "cyclonus.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	args := []string{
		"--server-protocol=TCP,UDP", "--exclude=" + strings.Join(append(sel.exclude, netpolExcluded...), ","),
		// Policies reach the nodes' rulesets well within this (the
		// enforcer batches changes for 100 ms); a probe that disagrees is
		// repeated twice before the case fails.
		"--perturbation-wait-seconds=2", "--retries=2",
		// A refused connection fails at once (the rulesets reject);
		// only a lost UDP reply waits this long.
		"--job-timeout-seconds=2",
		// Both nodes pull agnhost first.
		"--pod-creation-timeout-seconds=300",
		"--junit-results-file=" + filepath.Join(dir, "junit.xml")}
	if len(sel.include) > 0 {
		args = append(args, "--include="+strings.Join(sel.include, ","))
	}
	if sel.focus != "" {
		args = append(args, "--focus="+sel.focus)
	}
	cmd := exec.CommandContext(ctx, a.Cyclonus, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("cyclonus: %v; see %s", err, logPath)
	}
	out, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	m := cyclonusCases.FindSubmatch(out)
	if m == nil {
		t.Fatalf("cyclonus did not say how many cases it runs; see %s", logPath)
	}
	cases, _ := strconv.Atoi(string(m[1]))
	r, err := ReadResult(filepath.Join(dir, "junit.xml"), AnyCase)
	if err != nil {
		t.Fatalf("cyclonus: no report: %v; see %s", err, logPath)
	}
	r.Duration = time.Since(start)
	if r.Passed+r.Failed != cases || cases == 0 {
		t.Errorf("cyclonus reported %d cases of the %d it runs; see %s", r.Passed+r.Failed, cases, logPath)
	}
	t.Logf("netpol cases (cyclonus): %d passed, %d failed in %s; tables in %s", r.Passed, r.Failed, r.Duration.Round(time.Second), logPath)
	return r
}
