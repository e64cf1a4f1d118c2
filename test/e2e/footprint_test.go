package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// initBudgetFile holds the ceiling of what the binary's package
// initializations may cost; a commit that must raise it says why.
const initBudgetFile = "testdata/init-budget.txt"

// initLine is a line of GODEBUG=inittrace=1: a package's name, and the
// bytes its initialization allocated.
var initLine = regexp.MustCompile(`^init (\S+) @\S+ ms, \S+ ms clock, (\d+) bytes, \d+ allocs$`)

// packageInit is one package's initialization.
type packageInit struct {
	pkg   string
	bytes int64
}

// TestInitBudget: one binary carries every server, so every process of it
// (a server, the kubelet it starts, kubectl, containerd's shim of a plain
// build) runs the initialization of every package linked, before any
// command. Their number and the bytes they allocate are the same from run
// to run (the bytes within ~1%), unlike start-up times, so they are held to
// a budget here; bench/startup measures the times.
func TestInitBudget(t *testing.T) {
	t.Parallel()
	budget := readInitBudget(t)
	var inits []packageInit
	var allocated int64
	// The bytes vary a little (maps' growth): the least of three runs.
	for i := range 3 {
		run := initTrace(t)
		total := sumBytes(run)
		if i > 0 && len(run) != len(inits) {
			t.Fatalf("the number of package inits changed between runs: %d, then %d", len(inits), len(run))
		}
		if i == 0 || total < allocated {
			inits, allocated = run, total
		}
	}
	t.Logf("kubeboot version: %d package inits allocating %d bytes (budget %d, %d)", len(inits), allocated, budget["inits"], budget["bytes"])
	if int64(len(inits)) > budget["inits"] || allocated > budget["bytes"] {
		t.Errorf("package initialization is over budget (%s): %d inits (budget %d), %d bytes (budget %d). "+
			"Link less (docs/performance.md, \"What every start costs\"), or raise the budget in the commit that says why. The most allocating:\n%s",
			initBudgetFile, len(inits), budget["inits"], allocated, budget["bytes"], topInits(inits, 10))
	}
}

// TestKubectlTranslations: kubectl loads its translations for the
// system's language, though no other command of the binary does
// (internal/app/translations).
func TestKubectlTranslations(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(suite.kubectl, "--help")
	cmd.Env = append(os.Environ(), "LANG=fr_FR.UTF-8", "LC_ALL=", "LC_MESSAGES=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl --help: %v\n%s", err, out)
	}
	if want := "Modifier des fichiers kubeconfig"; !bytes.Contains(out, []byte(want)) {
		t.Errorf("kubectl --help with LANG=fr_FR.UTF-8 does not say %q:\n%s", want, out)
	}
	for _, p := range initTrace(t) {
		if p.pkg == "k8s.io/kubectl/pkg/cmd/options" && p.bytes > 1<<20 {
			t.Errorf("kubectl's translations were loaded by `kubeboot version`: %s allocated %d bytes", p.pkg, p.bytes)
		}
	}
}

// initTrace runs `kubeboot version` with GODEBUG=inittrace=1 and returns
// its package initializations.
func initTrace(t *testing.T) []packageInit {
	t.Helper()
	cmd := exec.Command(suite.bin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubeboot version: %v\n%s", err, stderr.Bytes())
	}
	var inits []packageInit
	for line := range strings.Lines(stderr.String()) {
		m := initLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		n, _ := strconv.ParseInt(m[2], 10, 64)
		inits = append(inits, packageInit{m[1], n})
	}
	if len(inits) == 0 {
		t.Fatalf("GODEBUG=inittrace=1 kubeboot version traced no package:\n%s", stderr.Bytes())
	}
	return inits
}

func sumBytes(inits []packageInit) int64 {
	var n int64
	for _, p := range inits {
		n += p.bytes
	}
	return n
}

// topInits lists the n initializations that allocated most.
func topInits(inits []packageInit, n int) string {
	sorted := slices.Clone(inits)
	slices.SortFunc(sorted, func(a, b packageInit) int { return int(b.bytes - a.bytes) })
	var b strings.Builder
	for _, p := range sorted[:min(n, len(sorted))] {
		fmt.Fprintf(&b, "  %10d  %s\n", p.bytes, p.pkg)
	}
	return b.String()
}

// readInitBudget reads initBudgetFile: lines of a name and a number;
// # starts a comment.
func readInitBudget(t *testing.T) map[string]int64 {
	t.Helper()
	f, err := os.Open(filepath.FromSlash(initBudgetFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	budget := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseInt(strings.ReplaceAll(fields[len(fields)-1], "_", ""), 10, 64)
		if len(fields) != 2 || err != nil {
			t.Fatalf("%s: %q is not a name and a number", initBudgetFile, sc.Text())
		}
		budget[fields[0]] = n
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"inits", "bytes"} {
		if _, ok := budget[name]; !ok {
			t.Fatalf("%s has no %s", initBudgetFile, name)
		}
	}
	return budget
}
