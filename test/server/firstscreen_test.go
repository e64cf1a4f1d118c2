package server

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/test/harness"
)

// klogWarningOrWorse matches a klog line of severity warning, error or
// fatal ("E1126 13:11:17.855042 27564 file.go:458] ...").
var klogWarningOrWorse = regexp.MustCompile(`^[WEF]\d{4} `)

// TestFirstScreen: what `kubeboot server` prints on a fresh start and on
// a restart, run for a few seconds and stopped, is a few lines (version, data
// dir, log file, address, admin kubeconfig, ready in N ms, what to try),
// with no warning or error: the component logs are in
// <data-dir>/logs/kubeboot.log.
func TestFirstScreen(t *testing.T) {
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	for _, start := range []string{"fresh start", "restart"} {
		cmd := exec.Command(bin, "server", "--data-dir", dataDir, "--bind-address", "127.0.0.1", "--secure-port", "0")
		// As on a terminal: not the journal, where every line is kept.
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "JOURNAL_STREAM=") })
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = cmd.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			defer close(lines)
			scanner := bufio.NewScanner(stderr)
			for scanner.Scan() {
				lines <- scanner.Text()
			}
		}()
		var screen []string
		timeout := time.After(time.Minute)
	read:
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("%s: the server exited before it was ready:\n%s", start, strings.Join(screen, "\n"))
				}
				screen = append(screen, line)
				if strings.HasPrefix(line, "ready in ") {
					break read
				}
			case <-timeout:
				_ = cmd.Process.Kill()
				t.Fatalf("%s: not ready within a minute:\n%s", start, strings.Join(screen, "\n"))
			}
		}
		// The controllers and scheduler start once the server is ready:
		// the terminal is watched for a few seconds more, and through the
		// stop, whose errors (work it cut short) go to the log file only.
		settled := time.After(3 * time.Second)
	running:
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("%s: the server exited:\n%s", start, strings.Join(screen, "\n"))
				}
				screen = append(screen, line)
			case <-settled:
				break running
			}
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		for line := range lines {
			screen = append(screen, line)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("%s: exit after SIGTERM: %v", start, err)
		}
		text := strings.Join(screen, "\n")
		if len(screen) > 10 {
			t.Errorf("%s: %d lines on the terminal, want at most 10:\n%s", start, len(screen), text)
		}
		for _, line := range screen {
			if klogWarningOrWorse.MatchString(line) {
				t.Errorf("%s: a warning or error on the terminal: %s", start, line)
			}
		}
		for _, want := range []string{"data dir " + dataDir, "admin kubeconfig: " + filepath.Join(dataDir, "admin.kubeconfig"), "serving on https://127.0.0.1:", "try: kubeboot kubectl"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: the terminal lacks %q:\n%s", start, want, text)
			}
		}
		log, err := os.ReadFile(filepath.Join(dataDir, "logs", "kubeboot.log"))
		if err != nil {
			t.Fatalf("%s: %v", start, err)
		}
		if !strings.Contains(string(log), "kubeboot apiserver is ready") {
			t.Errorf("%s: logs/kubeboot.log lacks the components' log lines (%d bytes)", start, len(log))
		}
	}
}
