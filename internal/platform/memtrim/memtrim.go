// Package memtrim releases memory a long-running server only needed while
// starting.
//
// Most of a kubeboot process's resident set at start is the executable
// itself: the code and read-only data that package initialization and
// server assembly ran through once (type registration of every k8s.io/api
// group, OpenAPI building, ...). Those pages are clean and file-backed:
// the kernel can drop them at any time and read them back from the page
// cache if they are ever touched again. Advising it to do so once the
// server is ready takes them out of the resident set now, instead of
// whenever memory gets tight; what the idle server really uses comes back
// on its own. See docs/decisions.md for the measured effect.
package memtrim

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ExecutableRange is one read-only, file-backed mapping of the executable.
type ExecutableRange struct {
	Start, End uint64
}

// executableRanges lists the executable's read-only mappings (code and
// read-only data) from /proc/self/maps. Writable mappings are never
// touched.
func executableRanges() ([]ExecutableRange, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []ExecutableRange
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe || strings.Contains(fields[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("parsing /proc/self/maps line %q", sc.Text())
		}
		out = append(out, ExecutableRange{Start: start, End: end})
	}
	return out, sc.Err()
}
