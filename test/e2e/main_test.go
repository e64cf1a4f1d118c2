// Package e2e drives one real `kubeboot apiserver` process with kubectl
// (kubeboot's own, upstream's kubectl through a link named kubectl) and
// asserts what a real kube-apiserver does, as recorded in testdata/
// (copied from the shared reference captures).
//
// TestMain builds the binary once, starts one server on a fresh data dir and
// stops it with SIGTERM at the end. Every test works in a namespace of its
// own and runs in parallel.
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
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeboot/kubeboot/test/harness"
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
	bin        string // path of the kubeboot binary
	kubectl    string // path of the kubectl binary
	kubeconfig string // <data-dir>/admin.kubeconfig
	cacheDir   string // kubectl --cache-dir, private to this run
	url        string // https://127.0.0.1:PORT as printed by the server
	port       string
	cfg        *rest.Config
	admin      *http.Client // cluster-admin client certificate
	anon       *http.Client // verifies the server against the CA, no credentials
}

var nsCounter atomic.Int64

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

// runSuite builds and starts the server, runs the tests and stops the
// server, returning the process exit code.
func runSuite(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "kubeboot-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(tmp)

	start := time.Now()
	bin, err := harness.Build(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build:", err)
		return 1
	}
	built := time.Now()
	suite.bin = bin
	// kubectl is kubeboot's own (upstream's, of the same Kubernetes
	// version), run through a link named kubectl, as users may install it.
	suite.kubectl = filepath.Join(tmp, "kubectl")
	if err := os.Symlink(bin, suite.kubectl); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
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
	stopped := time.Now()
	if err := srv.Terminate(stopTimeout); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: kubeboot did not exit 0 within %s of SIGTERM: %v\n%s\n", stopTimeout, err, logTail(srv))
		code = 1
	} else {
		fmt.Fprintf(os.Stderr, "e2e: kubeboot exited 0 %s after SIGTERM\n", time.Since(stopped).Round(time.Millisecond))
	}
	return code
}

var servingRE = regexp.MustCompile(`kubeboot apiserver serving on (https://127\.0\.0\.1:(\d+))`)

// startServer starts kubeboot on a fresh data dir, waits for /readyz 200
// and fills in suite from the serving line it printed and its
// admin.kubeconfig.
func startServer(bin, tmp string) (*harness.APIServer, error) {
	dataDir := filepath.Join(tmp, "data")
	srv, err := harness.Start(bin, dataDir,
		"--bind-address", "127.0.0.1",
		"--secure-port", "0",
		"--service-cluster-ip-range", serviceCIDR)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*harness.APIServer, error) {
		srv.Kill()
		return nil, fmt.Errorf("%v\n%s", err, logTail(srv))
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := srv.WaitReady(ctx); err != nil {
		return fail(err)
	}
	m := servingRE.FindStringSubmatch(srv.Logs())
	if m == nil {
		return fail(errors.New("ready, but no serving line printed"))
	}
	suite.url, suite.port = m[1], m[2]

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
	return srv, nil
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

// logTail returns the end of the server's log, for failure messages.
func logTail(srv *harness.APIServer) string {
	b := srv.Logs()
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return "--- kubeboot log tail ---\n" + b
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
