package memtrim

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestExecutableRanges(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/maps")
	}
	ranges, err := executableRanges()
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) == 0 {
		t.Fatal("no read-only mapping of the executable found")
	}
	// This function's own code must be inside one of them.
	pc, _, _, _ := runtime.Caller(0)
	found := false
	for _, r := range ranges {
		if r.Start >= r.End {
			t.Errorf("empty range %+v", r)
		}
		if uint64(pc) >= r.Start && uint64(pc) < r.End {
			found = true
		}
	}
	if !found {
		t.Errorf("the running code (pc %#x) is in none of %+v", pc, ranges)
	}
}

// executableRSS is the resident size, in kB, of this process's read-only
// mappings of its executable (those ReleaseStartupPages advises).
func executableRSS(t *testing.T) int {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	total, inExe := 0, false
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			// A mapping's header: address perms offset dev inode [path].
			inExe = len(fields) >= 6 && fields[5] == exe && !strings.Contains(fields[1], "w")
			continue
		}
		if v, ok := strings.CutPrefix(line, "Rss:"); ok && inExe {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			total += n
		}
	}
	return total
}

// helperEnv makes the test binary a helper process that releases its
// pages and prints its executable RSS before and after.
const helperEnv = "MEMTRIM_TEST_HELPER"

func TestReleaseStartupPagesShrinksExecutableRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	if os.Getenv(helperEnv) != "" {
		before := executableRSS(t)
		if _, err := ReleaseStartupPages(); err != nil {
			t.Skipf("MADV_PAGEOUT not available here: %v", err)
		}
		fmt.Printf("RSS %d %d\n", before, executableRSS(t))
		return
	}
	// A copy written just now is dirty in the page cache, as the
	// executable of `go run` is; the kernel pages out only clean pages.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(t.TempDir(), "memtrim.test")
	if err := os.WriteFile(fresh, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(fresh, "-test.run=^TestReleaseStartupPagesShrinksExecutableRSS$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var before, after int
	for _, line := range strings.Split(string(out), "\n") {
		if _, err := fmt.Sscanf(line, "RSS %d %d", &before, &after); err == nil {
			break
		}
	}
	if before == 0 {
		t.Skipf("helper did not release (no MADV_PAGEOUT?):\n%s", out)
	}
	// What the helper touches after the release comes back; much of the
	// rest of a small test binary must go (without the write-back, none of
	// it does). On an idle machine about 45% goes; with the whole suite
	// writing to disk beside it, once 25%: write-back lags.
	if after > before*9/10 {
		t.Errorf("executable RSS %d kB before, %d kB after: less than a tenth released", before, after)
	}
	t.Logf("executable RSS %d kB -> %d kB", before, after)
}
