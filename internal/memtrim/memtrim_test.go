package memtrim

import (
	"os"
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

// rssFile is RssFile of this process in kB.
func rssFile(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

func TestReleaseStartupPagesShrinksFileBackedRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	before := rssFile(t)
	n, err := ReleaseStartupPages()
	if err != nil {
		t.Skipf("MADV_PAGEOUT not available here: %v", err)
	}
	after := rssFile(t)
	if n == 0 {
		t.Fatal("no bytes advised")
	}
	if after >= before {
		t.Errorf("RssFile %d kB before, %d kB after: nothing released", before, after)
	}
	t.Logf("advised %d MiB; RssFile %d kB -> %d kB", n>>20, before, after)
}
