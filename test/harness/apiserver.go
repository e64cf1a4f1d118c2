package harness

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// APIServer is a `kubeboot apiserver` (or `kubeboot server`) process.
type APIServer struct {
	// DataDir is the process's --data-dir.
	DataDir string

	cmd    *exec.Cmd
	mu     sync.Mutex
	logs   bytes.Buffer
	exited chan struct{}
	err    error
}

// StartAPIServer starts `bin apiserver --data-dir dataDir args...`; the
// process is killed when the test ends if it is still running.
func StartAPIServer(t testing.TB, bin, dataDir string, args ...string) *APIServer {
	t.Helper()
	s, err := Start(bin, dataDir, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			t.Logf("logs of the apiserver in %s:\n%s", dataDir, s.Logs())
		}
	})
	return s
}

// StartAgent starts `bin agent --data-dir dataDir args...`, a node
// joining a cluster (it has no /readyz: the test waits for its Node); the
// process is killed when the test ends if it is still running.
func StartAgent(t testing.TB, bin, dataDir string, args ...string) *APIServer {
	t.Helper()
	s, err := startCommand(bin, "agent", "", dataDir, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			t.Logf("logs of the agent in %s:\n%s", dataDir, s.Logs())
		}
	})
	return s
}

// StartReadyAPIServer is StartAPIServer, then waits up to timeout for
// /readyz 200; it fails the test if the server is not ready by then.
func StartReadyAPIServer(t testing.TB, timeout time.Duration, bin, dataDir string, args ...string) *APIServer {
	t.Helper()
	return StartReady(t, timeout, bin, "apiserver", dataDir, args...)
}

// StartReadyServer is StartReadyAPIServer for `bin server`: the apiserver
// with kube-controller-manager and kube-scheduler in one process.
func StartReadyServer(t testing.TB, timeout time.Duration, bin, dataDir string, args ...string) *APIServer {
	t.Helper()
	return StartReady(t, timeout, bin, "server", dataDir, args...)
}

// StartReady starts `bin command --data-dir dataDir args...` (command is
// apiserver or server) and waits up to timeout for /readyz 200; the
// process is killed when the test ends if it is still running.
func StartReady(t testing.TB, timeout time.Duration, bin, command, dataDir string, args ...string) *APIServer {
	t.Helper()
	return StartReadyNamed(t, timeout, bin, command, "", dataDir, args...)
}

// StartReadyNamed is StartReady in a UTS namespace of its own whose host
// name is hostname (root only; "" keeps the machine's): servers of one
// cluster on one machine then have identities as distinct as on machines
// of their own (leader election holders, apiserver identity Leases).
func StartReadyNamed(t testing.TB, timeout time.Duration, bin, command, hostname, dataDir string, args ...string) *APIServer {
	t.Helper()
	s, err := startCommand(bin, command, hostname, dataDir, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			t.Logf("logs of the %s in %s:\n%s", command, dataDir, s.Logs())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// Start starts `bin apiserver --data-dir dataDir args...`; the caller
// stops it (StartAPIServer is the same for a test, which stops it itself).
func Start(bin, dataDir string, args ...string) (*APIServer, error) {
	return startCommand(bin, "apiserver", "", dataDir, args...)
}

// startCommand starts `bin command --data-dir dataDir args...`, with
// hostname as its host name unless it is "".
func startCommand(bin, command, hostname, dataDir string, args ...string) (*APIServer, error) {
	s := &APIServer{DataDir: dataDir, exited: make(chan struct{})}
	// Every log line in the process's output, which a failed test prints.
	argv := append([]string{bin, command, "--data-dir", dataDir, "--log-to-stderr"}, args...)
	// Servers of tests and benchmarks share the machine's addresses: each
	// serves cluster DNS on a port of its own, unless told one.
	if command == "server" && !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--cluster-dns-port") }) {
		argv = append(argv, "--cluster-dns-port=0")
	}
	if hostname != "" {
		// unshare and sh exec in turn: the process is the server's.
		argv = append([]string{"unshare", "--uts", "--", "sh", "-c", `hostname "$0" && exec "$@"`, hostname}, argv...)
	}
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Stdout = s.writer()
	s.cmd.Stderr = s.writer()
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	return s, nil
}

type lockedWriter struct{ s *APIServer }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.logs.Write(p)
}

func (s *APIServer) writer() lockedWriter { return lockedWriter{s} }

// Logs returns what the process printed so far.
func (s *APIServer) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// PID is the process ID.
func (s *APIServer) PID() int { return s.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (s *APIServer) Exited() <-chan struct{} { return s.exited }

// ExitErr is the process's exit error (nil for exit 0), once Exited.
func (s *APIServer) ExitErr() error { return s.err }

// Kill sends SIGKILL and waits for the process to exit (at once if it
// has).
func (s *APIServer) Kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// Terminate sends SIGTERM and waits up to timeout for a clean exit.
func (s *APIServer) Terminate(timeout time.Duration) error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-s.exited:
		return s.err
	case <-time.After(timeout):
		s.Kill()
		return fmt.Errorf("apiserver in %s did not exit within %s of SIGTERM", s.DataDir, timeout)
	}
}

// Config returns the admin client configuration (admin.kubeconfig).
// Client-side rate limiting is off: tests poll fast on purpose and time
// what they see.
func (s *APIServer) Config() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(s.DataDir, "admin.kubeconfig"))
	if err != nil {
		return nil, err
	}
	cfg.QPS = -1
	// Tests read the kubernetes Endpoints on purpose.
	cfg.WarningHandler = rest.NoWarnings{}
	return cfg, nil
}

// Client returns an admin clientset.
func (s *APIServer) Client() (kubernetes.Interface, error) {
	cfg, err := s.Config()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// MustClient is Client for a test: it fails the test on error.
func (s *APIServer) MustClient(t testing.TB) kubernetes.Interface {
	t.Helper()
	c, err := s.Client()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// WaitReady waits until /readyz answers 200 or the process exits.
func (s *APIServer) WaitReady(ctx context.Context) error {
	kubeconfig := filepath.Join(s.DataDir, "admin.kubeconfig")
	for {
		if cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig); err == nil {
			if ok, _ := readyz(ctx, cfg); ok {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("apiserver in %s exited before it was ready: %v\n%s", s.DataDir, s.err, s.Logs())
		case <-ctx.Done():
			return fmt.Errorf("apiserver in %s not ready: %w\n%s", s.DataDir, ctx.Err(), s.Logs())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// readyz asks /readyz anonymously, trusting the cluster CA.
func readyz(ctx context.Context, cfg *rest.Config) (bool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cfg.CAData) {
		return false, errors.New("no CA in kubeconfig")
	}
	client := &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/readyz", nil)
	if err != nil {
		return false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

// SharePKI copies the cluster CA of one data dir into others, so that
// several apiservers of one cluster trust each other's clients.
func SharePKI(from string, to ...string) error {
	for _, dir := range to {
		if err := os.MkdirAll(filepath.Join(dir, "pki"), 0o700); err != nil {
			return err
		}
		for _, f := range []string{"ca.crt", "ca.key"} {
			b, err := os.ReadFile(filepath.Join(from, "pki", f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, "pki", f), b, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}
