// Package e2e drives one real `kubeboot apiserver` process with the real
// kubectl binary and asserts what a real kube-apiserver 1.36 does, as
// recorded in testdata/ (copied from the shared reference captures).
//
// TestMain builds the binary once, starts one server on a fresh data dir and
// stops it with SIGTERM at the end. Every test works in a namespace of its
// own and runs in parallel. Without kubectl on PATH the tests skip, unless
// CI=true, where they fail.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// serviceCIDR is the --service-cluster-ip-range the server runs with,
	// the same as in the reference captures.
	serviceCIDR = "10.96.0.0/16"
	// pollInterval is how often eventually re-checks a condition.
	pollInterval = 50 * time.Millisecond
	// kubectlTimeout bounds one kubectl invocation.
	kubectlTimeout = 30 * time.Second
	// startTimeout bounds the server start up to /readyz 200.
	startTimeout = 90 * time.Second
	// stopTimeout is how long the server may take to exit after SIGTERM.
	stopTimeout = 5 * time.Second
)

// suite is the state TestMain shares with the tests.
var suite struct {
	unavailable string // why the suite cannot run; tests skip (or fail in CI)
	kubectl     string // path of the kubectl binary
	kubeconfig  string // <data-dir>/admin.kubeconfig
	cacheDir    string // kubectl --cache-dir, private to this run
	url         string // https://127.0.0.1:PORT as printed by the server
	port        string
	cfg         *rest.Config
	admin       *http.Client // cluster-admin client certificate
	anon        *http.Client // verifies the server against the CA, no credentials
}

var nsCounter atomic.Int64

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

// runSuite builds and starts the server, runs the tests and stops the
// server, returning the process exit code.
func runSuite(m *testing.M) int {
	path, err := exec.LookPath("kubectl")
	if err != nil {
		suite.unavailable = "kubectl not found on PATH: " + err.Error()
		return m.Run()
	}
	suite.kubectl = path

	tmp, err := os.MkdirTemp("", "kubeboot-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(tmp)

	start := time.Now()
	bin, err := buildKubeboot(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build:", err)
		return 1
	}
	built := time.Now()
	srv, err := startServer(bin, tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: built in %s, server %s ready in %s\n",
		built.Sub(start).Round(time.Millisecond), suite.url, time.Since(built).Round(time.Millisecond))

	code := m.Run()

	// Whatever the tests sent, the server must still be ready.
	if err := waitReady(5 * time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: FAIL: server not ready after the suite:", err)
		code = 1
	}
	if err := srv.stop(stopTimeout); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: FAIL: stop:", err)
		fmt.Fprintln(os.Stderr, srv.logTail())
		code = 1
	}
	return code
}

// moduleRoot finds the directory holding go.mod: `go env GOMOD` first,
// walking up from the working directory otherwise.
func moduleRoot() (string, error) {
	if out, err := exec.Command("go", "env", "GOMOD").Output(); err == nil {
		gomod := strings.TrimSpace(string(out))
		if gomod != "" && gomod != os.DevNull {
			return filepath.Dir(gomod), nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// buildKubeboot runs `go build -o <tmp>/kubeboot ./cmd/kubeboot`.
func buildKubeboot(tmp string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(tmp, "kubeboot")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/kubeboot")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/kubeboot in %s: %v\n%s", root, err, out)
	}
	return bin, nil
}

// server is the running kubeboot process.
type server struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	waitErr error
}

var servingRE = regexp.MustCompile(`kubeboot apiserver serving on (https://127\.0\.0\.1:(\d+))`)

// startServer starts kubeboot on a fresh data dir, waits for the serving
// line and for /readyz 200, and fills in suite.
func startServer(bin, tmp string) (*server, error) {
	dataDir := filepath.Join(tmp, "data")
	logPath := filepath.Join(tmp, "kubeboot.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "apiserver",
		"--data-dir", dataDir,
		"--bind-address", "127.0.0.1",
		"--secure-port", "0",
		"--service-cluster-ip-range", serviceCIDR)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	s := &server{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		s.waitErr = cmd.Wait()
		logFile.Close()
		close(s.done)
	}()

	fail := func(err error) (*server, error) {
		_ = cmd.Process.Kill()
		<-s.done
		return nil, fmt.Errorf("%v\n%s", err, s.logTail())
	}
	deadline := time.Now().Add(startTimeout)
	for suite.url == "" {
		select {
		case <-s.done:
			return fail(fmt.Errorf("kubeboot exited before serving: %v", s.waitErr))
		case <-time.After(pollInterval):
		}
		if time.Now().After(deadline) {
			return fail(errors.New("no serving line within " + startTimeout.String()))
		}
		if b, err := os.ReadFile(logPath); err == nil {
			if m := servingRE.FindSubmatch(b); m != nil {
				suite.url, suite.port = string(m[1]), string(m[2])
			}
		}
	}

	suite.kubeconfig = filepath.Join(dataDir, "admin.kubeconfig")
	suite.cacheDir = filepath.Join(tmp, "kubectl-cache")
	cfg, err := clientcmd.BuildConfigFromFlags("", suite.kubeconfig)
	if err != nil {
		return fail(fmt.Errorf("admin.kubeconfig: %v", err))
	}
	if cfg.Host != suite.url {
		return fail(fmt.Errorf("admin.kubeconfig server %q, want the serving URL %q", cfg.Host, suite.url))
	}
	suite.cfg = cfg
	if suite.admin, err = rest.HTTPClientFor(cfg); err != nil {
		return fail(err)
	}
	if suite.anon, err = rest.HTTPClientFor(rest.AnonymousClientConfig(cfg)); err != nil {
		return fail(err)
	}
	if err := waitReady(time.Until(deadline)); err != nil {
		return fail(err)
	}
	return s, nil
}

// waitReady polls /readyz anonymously until it answers 200.
func waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		resp, err := suite.anon.Get(suite.url + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("/readyz not 200 within %s: %s", timeout, last)
		}
		time.Sleep(pollInterval)
	}
}

// stop sends SIGTERM and requires exit code 0 within timeout.
func (s *server) stop(timeout time.Duration) error {
	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-s.done:
	case <-time.After(timeout):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("kubeboot did not exit within %s of SIGTERM", timeout)
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("kubeboot exited %d after SIGTERM (%v)", code, s.waitErr)
	}
	fmt.Fprintf(os.Stderr, "e2e: kubeboot exited 0 %s after SIGTERM\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// logTail returns the end of the server log, for failure messages.
func (s *server) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return "--- kubeboot log tail ---\n" + string(b)
}

// requireServer skips the test when kubectl is missing, or fails it when
// CI=true.
func requireServer(t *testing.T) {
	t.Helper()
	if suite.unavailable == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(suite.unavailable)
	}
	t.Skip(suite.unavailable)
}

// result is what one kubectl run produced.
type result struct {
	cmdline string
	stdout  string
	stderr  string
	err     error
}

// runKubectl runs kubectl against the suite's server with stdin (may be
// empty) and never fails the test by itself.
func runKubectl(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	full := append([]string{"--kubeconfig", suite.kubeconfig, "--cache-dir", suite.cacheDir}, args...)
	cmd := exec.CommandContext(ctx, suite.kubectl, full...)
	cmd.Env = kubectlEnv()
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return result{
		cmdline: "kubectl " + strings.Join(args, " "),
		stdout:  stdout.String(),
		stderr:  stderr.String(),
		err:     err,
	}
}

// kubectlEnv is the environment without a KUBECONFIG that could point
// kubectl elsewhere.
func kubectlEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	return env
}

// kubectl runs kubectl, requires success and returns stdout.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return kubectlStdin(t, "", args...)
}

// kubectlStdin is kubectl with stdin.
func kubectlStdin(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := runKubectl(t, stdin, args...)
	if r.err != nil {
		t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", r.cmdline, r.err, r.stdout, r.stderr)
	}
	return r.stdout
}

// kubectlFails runs kubectl with stdin (may be empty), requires a non-zero
// exit and returns stderr with the trailing newline trimmed.
func kubectlFails(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := runKubectl(t, stdin, args...)
	if r.err == nil {
		t.Fatalf("%s: succeeded, want an error\nstdout: %s", r.cmdline, r.stdout)
	}
	return strings.TrimRight(r.stderr, "\n")
}

// newNamespace creates a namespace named after the test with kubectl and
// returns its name.
func newNamespace(t *testing.T) string {
	t.Helper()
	slug := strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(slug) > 40 {
		slug = strings.TrimRight(slug[:40], "-")
	}
	name := "e2e-" + slug + "-" + strconv.FormatInt(nsCounter.Add(1), 10)
	out := kubectl(t, "create", "namespace", name)
	if want := "namespace/" + name + " created\n"; out != want {
		t.Fatalf("kubectl create namespace %s printed %q, want %q", name, out, want)
	}
	return name
}

// eventually polls cond every pollInterval until it returns true or
// timeout passes; cond's last message explains the failure.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, timeout, msg)
		}
		time.Sleep(pollInterval)
	}
}

// apiRequest sends a raw HTTPS request with the admin client certificate
// and returns the status code and body.
func apiRequest(t *testing.T, method, path string, body []byte) (int, []byte) {
	t.Helper()
	return doRequest(t, suite.admin, method, path, body)
}

// doRequest sends one request with client c.
func doRequest(t *testing.T, c *http.Client, method, path string, body []byte) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, suite.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return resp.StatusCode, b
}
