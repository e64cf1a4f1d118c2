package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cyclonus's generated NetworkPolicy cases (github.com/mattfenwick/cyclonus),
// which test/netpol runs: for each case it applies the policies to Pods
// x/a..z/c (9 Pods in 3 namespaces, spread over the nodes), computes the
// reachability upstream's semantics give with its own matcher, and probes
// every pair of Pods on each port and protocol, through their Services'
// names. Our runner of them (CyclonusDir) is a module of its own
// (docs/decisions.md).

// NetpolSelection chooses among cyclonus's generated cases: those with
// any of Include's tags (all, if none) and none of Exclude's, whose
// description Focus matches. The cases tagged sctp never run: this
// kernel has no SCTP.
type NetpolSelection struct {
	Include, Exclude []string
	Focus            string
}

// ParseNetpolSelection reads a selection as hack/conformance/run.sh's
// NETPOL gives it: "all", or a comma-separated list of cyclonus's tags,
// each with a "-" before it to leave out the cases it tags.
func ParseNetpolSelection(s string) NetpolSelection {
	var sel NetpolSelection
	for _, tag := range strings.Split(s, ",") {
		if t, ok := strings.CutPrefix(tag, "-"); ok {
			sel.Exclude = append(sel.Exclude, t)
		} else if tag != "all" {
			sel.Include = append(sel.Include, tag)
		}
	}
	return sel
}

// CasesNamed selects the cases with these descriptions (which cyclonus
// does not keep unique: a description may name an ingress case and an
// egress one).
func CasesNamed(descriptions []string) NetpolSelection {
	var quoted []string
	for _, d := range descriptions {
		quoted = append(quoted, regexp.QuoteMeta(d))
	}
	return NetpolSelection{Focus: "^(" + strings.Join(quoted, "|") + ")$"}
}

// netpolExcluded are the tags never run: SCTP, which this kernel lacks.
var netpolExcluded = []string{"sctp"}

// args are the runner's flags for the selection.
func (sel NetpolSelection) args() []string {
	args := []string{"--exclude=" + strings.Join(append(slices.Clip(sel.Exclude), netpolExcluded...), ",")}
	if len(sel.Include) > 0 {
		args = append(args, "--include="+strings.Join(sel.Include, ","))
	}
	if sel.Focus != "" {
		args = append(args, "--focus="+sel.Focus)
	}
	return args
}

// cyclonusCase is the line of the runner's output that describes a case.
var cyclonusCase = regexp.MustCompile(`(?m)^test #\d+: (.*)$`)

// CyclonusCases are the descriptions of the cases sel selects, in the
// order the runner at bin runs them, as its dry run lists them.
func CyclonusCases(ctx context.Context, bin string, sel NetpolSelection) ([]string, error) {
	out, err := exec.CommandContext(ctx, bin, append(sel.args(), "--dry-run")...).Output()
	if err != nil {
		return nil, fmt.Errorf("cyclonus --dry-run: %w%s", err, stderrOf(err))
	}
	var cases []string
	for _, m := range cyclonusCase.FindAllSubmatch(out, -1) {
		cases = append(cases, string(m[1]))
	}
	return cases, nil
}

// BuildCyclonus builds the cases' runner into dir's bin and returns its
// path.
func BuildCyclonus(ctx context.Context, t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "bin", "cyclonus")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
	cmd.Dir = filepath.Join(ModuleRoot(t), CyclonusDir)
	if err := run(cmd); err != nil {
		t.Fatalf("building cyclonus's runner: %v", err)
	}
	return out
}

// cyclonusCount is the line of the runner's output that gives how many
// cases it runs.
var cyclonusCount = regexp.MustCompile(`(?m)^testing (\d+) cases$`)

// RunCyclonus runs the generated cases sel selects on the cluster, its
// output (cyclonus.log) and JUnit report in the report directory, and returns
// its result: a case passes when every probe of every step saw what
// cyclonus's matcher computed.
func RunCyclonus(ctx context.Context, t *testing.T, c *Cluster, sel NetpolSelection) Result {
	t.Helper()
	dir := c.Report
	logPath := filepath.Join(dir, "cyclonus.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	args := append(sel.args(), "--server-protocol=TCP,UDP",
		// Policies reach the nodes' rulesets well within this (the
		// enforcer batches changes for 100 ms); a probe that disagrees is
		// repeated twice before the case fails.
		"--perturbation-wait-seconds=2", "--retries=2",
		// A refused connection fails at once (the rulesets reject);
		// only a lost UDP reply waits this long.
		"--job-timeout-seconds=2",
		// Both nodes pull agnhost first.
		"--pod-creation-timeout-seconds=300",
		"--junit-results-file="+filepath.Join(dir, "junit.xml"))
	cmd := exec.CommandContext(ctx, c.Cyclonus, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("cyclonus: %v; see %s", err, logPath)
	}
	out, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	m := cyclonusCount.FindSubmatch(out)
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
