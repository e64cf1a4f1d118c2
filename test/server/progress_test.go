package server

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/test/harness"
)

// Enough simulated nodes that they take a few seconds to come up on two
// cores, well beyond the terminal's 300 ms before it shows a step.
const progressNodes = 250

// TestStartProgressOnTerminal: `kubeboot server` on a terminal shows how
// far a long step has come (simulated nodes coming up) on one line it
// rewrites, and replaces it, when the step ends, with one saying how long
// it took: the screen left is the first screen's few lines and that one. Off a terminal (TestFirstScreen) there is no
// progress line; the CRD installer's steps are checked in crdinstall.
func TestStartProgressOnTerminal(t *testing.T) {
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	control, tty := harness.OpenTerminal(t, 120)
	cmd := exec.Command(bin, "server", "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--bind-address", "127.0.0.1", "--secure-port", "0",
		fmt.Sprintf("--simulated-nodes=%d", progressNodes))
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "JOURNAL_STREAM=") })
	cmd.Stdout, cmd.Stderr = tty, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var (
		mu  sync.Mutex
		raw bytes.Buffer
	)
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := control.Read(buf)
			mu.Lock()
			raw.Write(buf[:n])
			mu.Unlock()
			// The terminal's reader gets EIO once the server has closed it.
			if err != nil {
				return
			}
		}
	}()
	output := func() string {
		mu.Lock()
		defer mu.Unlock()
		return raw.String()
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Error(err)
		}
		var exit *exec.ExitError
		if err := cmd.Wait(); err != nil && !errors.As(err, &exit) {
			t.Error(err)
		}
		select {
		case <-read:
		case <-time.After(10 * time.Second):
			t.Error("the terminal was not closed 10 s after the server exited")
		}
	}
	defer stop()

	// The nodes' step ends once they are all Ready; the terminal says so
	// in a line of its own.
	const step = "simulated nodes Ready "
	summary := regexp.MustCompile(fmt.Sprintf(`^%s%d/%d in [0-9.]+m?s$`, step, progressNodes, progressNodes))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out := output()
		screen := harness.RenderTerminal(out)
		ready := slices.ContainsFunc(screen, func(l string) bool { return strings.HasPrefix(l, "ready in ") })
		if ready && slices.ContainsFunc(screen, summary.MatchString) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 2 minutes the terminal did not show %q and then a line matching %s; it got:\n%q", step, summary, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	out := output()
	// Each progress line was drawn over the one before it.
	if !strings.Contains(out, "\r\x1b[K"+step) {
		t.Errorf("the progress line was not redrawn in place:\n%q", out)
	}
	screen := harness.RenderTerminal(out)
	if len(screen) > 10 {
		t.Errorf("%d lines left on the terminal, want at most 10:\n%s", len(screen), strings.Join(screen, "\n"))
	}
	for _, line := range screen {
		if (strings.Contains(line, step) && !summary.MatchString(line)) || klogWarningOrWorse.MatchString(line) {
			t.Errorf("left on the terminal: %q\nscreen:\n%s", line, strings.Join(screen, "\n"))
		}
	}
}
