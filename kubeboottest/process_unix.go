//go:build unix

package kubeboottest

import (
	"errors"
	"syscall"
)

// processRuns reports whether a process with this ID exists: signal 0
// checks without sending anything (EPERM: it exists, as another user's).
func processRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
