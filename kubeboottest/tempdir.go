package kubeboottest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tempDirPrefix names the data directories of servers whose Options gave
// none: kubeboottest-<pid>-<random>.
const tempDirPrefix = "kubeboottest-"

// NewTempDir makes a temporary directory named for this process, as
// StartServer does for a server's data. A test binary that exits without
// stopping its servers (os.Exit, a panic, a kill) leaves nothing running,
// since the servers live in its process, but it leaves their directories:
// the next NewTempDir, in any test binary, removes those whose process is
// gone. The caller removes the directory when done with it.
func NewTempDir() (string, error) {
	sweepTempDirs(os.TempDir())
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", tempDirPrefix, os.Getpid()))
	if err != nil {
		return "", fmt.Errorf("creating a data directory: %w", err)
	}
	return dir, nil
}

// sweepTempDirs removes the data directories in parent of processes that
// no longer run.
func sweepTempDirs(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, ok := tempDirPID(e.Name())
		if !ok || !e.IsDir() || pid == os.Getpid() || processRuns(pid) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(parent, e.Name()))
	}
}

// tempDirPID returns the process ID in a data directory's name.
func tempDirPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, tempDirPrefix)
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	return pid, err == nil && pid > 0
}
