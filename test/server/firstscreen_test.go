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
	dataDir := filepath.Join(t.TempDir(), "data")
	for _, start := range []string{"fresh start", "restart"} {
		s := startOnTerminal(t, start, "server", "--data-dir", dataDir, "--bind-address", "127.0.0.1", "--secure-port", "0")
		// The controllers and scheduler start once the server is ready:
		// the terminal is watched for a few seconds more, and through the
		// stop, whose errors (work it cut short) go to the log file only.
		s.watch(t, 3*time.Second)
		s.stop(t)
		text := strings.Join(s.screen, "\n")
		if len(s.screen) > 10 {
			t.Errorf("%s: %d lines on the terminal, want at most 10:\n%s", start, len(s.screen), text)
		}
		s.quiet(t)
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

// TestWalkthroughScreen: the README's walkthrough on simulated nodes (a
// Deployment created, rolled out, scaled up and down, exposed and
// deleted) leaves no warning or error on the server's terminal. The
// controllers' retried failures (1.37's ReplicaSet controller retries
// until its cache has its own writes) are in the log file only.
func TestWalkthroughScreen(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	s := startOnTerminal(t, "walkthrough", "server", "--data-dir", dataDir, "--bind-address", "127.0.0.1", "--secure-port", "0", "--simulated-nodes=3")
	kubeconfig := filepath.Join(dataDir, "admin.kubeconfig")
	for _, args := range [][]string{
		{"create", "deployment", "web", "--image=nginx", "--replicas=4"},
		{"rollout", "status", "deployment/web", "--timeout=2m"},
		{"expose", "deployment", "web", "--port=80"},
		{"scale", "deployment/web", "--replicas=12"},
		{"rollout", "status", "deployment/web", "--timeout=2m"},
		{"set", "image", "deployment/web", "nginx=nginx:1.27"},
		{"rollout", "status", "deployment/web", "--timeout=2m"},
		{"scale", "deployment/web", "--replicas=2"},
		{"rollout", "status", "deployment/web", "--timeout=2m"},
		{"delete", "service,deployment", "web", "--wait"},
	} {
		cmd := exec.Command(s.bin, append([]string{"kubectl", "--kubeconfig", kubeconfig}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			s.stop(t)
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	s.watch(t, 3*time.Second)
	s.stop(t)
	s.quiet(t)
}

// onTerminal is a kubeboot command whose standard output and error are
// read line by line, as a terminal shows them.
type onTerminal struct {
	name   string
	bin    string
	cmd    *exec.Cmd
	lines  chan string
	screen []string
}

// startOnTerminal runs kubeboot with args and reads its screen until it
// says it is ready.
func startOnTerminal(t *testing.T, name string, args ...string) *onTerminal {
	t.Helper()
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	s := &onTerminal{name: name, bin: bin, cmd: exec.Command(bin, args...), lines: make(chan string, 1024)}
	// As on a terminal: not the journal, where every line is kept.
	s.cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "JOURNAL_STREAM=") })
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout = s.cmd.Stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.lines)
		scanner := bufio.NewScanner(stderr)
		for scanner.Scan() {
			s.lines <- scanner.Text()
		}
	}()
	timeout := time.After(time.Minute)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				t.Fatalf("%s: the server exited before it was ready:\n%s", name, strings.Join(s.screen, "\n"))
			}
			s.screen = append(s.screen, line)
			if strings.HasPrefix(line, "ready in ") {
				return s
			}
		case <-timeout:
			_ = s.cmd.Process.Kill()
			t.Fatalf("%s: not ready within a minute:\n%s", name, strings.Join(s.screen, "\n"))
		}
	}
}

// watch reads the screen for d.
func (s *onTerminal) watch(t *testing.T, d time.Duration) {
	t.Helper()
	settled := time.After(d)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				t.Fatalf("%s: the server exited:\n%s", s.name, strings.Join(s.screen, "\n"))
			}
			s.screen = append(s.screen, line)
		case <-settled:
			return
		}
	}
}

// stop stops the server as ^C does and reads the screen to its end.
func (s *onTerminal) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for line := range s.lines {
		s.screen = append(s.screen, line)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("%s: exit after SIGTERM: %v", s.name, err)
	}
}

// quiet fails the test for each warning or error on the screen.
func (s *onTerminal) quiet(t *testing.T) {
	t.Helper()
	for _, line := range s.screen {
		if klogWarningOrWorse.MatchString(line) {
			t.Errorf("%s: a warning or error on the terminal: %s", s.name, line)
		}
	}
}
