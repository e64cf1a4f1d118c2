package badinput

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/kubeboottest"
	"github.com/kubeboot/kubeboot/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	// requestTimeout bounds one HTTP request to a server under test.
	requestTimeout = 20 * time.Second
	// processTimeout bounds a kubeboot process that is expected to refuse
	// to start: it must exit long before this.
	processTimeout = 30 * time.Second
	// startTimeout bounds a kubeboot process that is expected to start.
	startTimeout = 60 * time.Second
	// pollInterval is how often a condition is re-checked.
	pollInterval = 50 * time.Millisecond
)

// startServer starts an in-process kubeboot with a short data dir of its
// own (the embedded etcd's unix socket path must stay under 108 bytes,
// which a t.TempDir named after a long test name may not). The server is
// stopped, then the directory removed, when the test ends;
// configure, if set, changes its configuration.
func startServer(t testing.TB, configure ...func(*controlplane.Config)) *kubeboottest.Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "kb-badinput-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) }) // runs after the server's Stop
	opts := kubeboottest.Options{DataDir: dir}
	if len(configure) > 0 {
		opts.Configure = configure[0]
	}
	return kubeboottest.Start(t, opts)
}

// httpClientFor returns an HTTP client for cfg (TLS and credentials as
// configured) with a per-request timeout.
func httpClientFor(t testing.TB, cfg *rest.Config) *http.Client {
	t.Helper()
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Timeout = requestTimeout
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// anonymousClient trusts the server's CA and sends no credentials.
func anonymousClient(t testing.TB, cfg *rest.Config) *http.Client {
	t.Helper()
	return httpClientFor(t, rest.AnonymousClientConfig(cfg))
}

// response is what one HTTP request returned.
type response struct {
	code   int
	header http.Header
	body   []byte
}

// send does one request; a transport error (refused or dropped connection,
// reset, timeout) is returned as err. contentType defaults to
// application/json when there is a body.
func send(c *http.Client, method, url, contentType string, body []byte) (response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return response{}, err
	}
	if body != nil {
		if contentType == "" {
			contentType = "application/json"
		}
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	return doRequest(c, req)
}

// doRequest sends req and reads the whole answer.
func doRequest(c *http.Client, req *http.Request) (response, error) {
	resp, err := c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{code: resp.StatusCode, header: resp.Header}, fmt.Errorf("reading the %d response: %w", resp.StatusCode, err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: b}, nil
}

// statusOf decodes a failure Status from an error response and checks it
// is one: kind Status, status Failure, and the HTTP code repeated in it.
func statusOf(r response) (*metav1.Status, error) {
	var st metav1.Status
	if err := json.Unmarshal(r.body, &st); err != nil {
		return nil, fmt.Errorf("body is not a JSON Status (%v): %.300q", err, r.body)
	}
	if st.Kind != "Status" || st.Status != metav1.StatusFailure || int(st.Code) != r.code {
		return &st, fmt.Errorf("want a Status with status Failure and code %d, got kind %q status %q code %d: %.300q",
			r.code, st.Kind, st.Status, st.Code, r.body)
	}
	return &st, nil
}

// readyzCode asks /readyz anonymously and returns the HTTP code.
func readyzCode(c *http.Client, baseURL string) (int, error) {
	r, err := send(c, http.MethodGet, baseURL+"/readyz", "", nil)
	if err != nil {
		return 0, err
	}
	return r.code, nil
}

// requireReady fails the test unless /readyz answers 200.
func requireReady(t testing.TB, c *http.Client, baseURL, after string) {
	t.Helper()
	code, err := readyzCode(c, baseURL)
	if err != nil || code != http.StatusOK {
		t.Fatalf("/readyz after %s: HTTP %d, %v; want 200", after, code, err)
	}
}

// etcdClient connects to the embedded etcd of the server whose data dir is
// dataDir, over its unix socket.
func etcdClient(t testing.TB, dataDir string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"unix://" + filepath.Join(dataDir, "etcd", "etcd.sock")},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// volatilePrefixes are the keys the server's own controllers rewrite on a
// timer, whatever clients send, so a before/after comparison of them would
// measure the clock, not the request:
//   - /registry/leases/: the apiserver identity Lease is renewed every 10 s;
//   - /registry/masterleases/: the lease endpoint reconciler refreshes its
//     own key every reconcile interval (1 s);
//   - /registry/events/: Events the controllers record (and their TTL);
//   - /registry/services/endpoints/ and /registry/endpointslices/: the
//     kubernetes Endpoints and EndpointSlice, rewritten by the bootstrap
//     controller whenever the set of live master leases changes;
//   - /registry/ranges/: the NodePort (and legacy ClusterIP) allocation
//     bitmaps, rewritten by the repair loops.
//
// Everything else under /registry (namespaces, configmaps, secrets,
// services, serviceaccounts, ipaddresses, servicecidrs, ...) must not move
// when a request is refused.
var volatilePrefixes = []string{
	"/registry/leases/",
	"/registry/masterleases/",
	"/registry/events/",
	"/registry/services/endpoints/",
	"/registry/endpointslices/",
	"/registry/ranges/",
}

// snapshot maps every non-volatile key under /registry/ to its mod
// revision.
func snapshot(t testing.TB, cli *clientv3.Client) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/registry/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("listing /registry/ in etcd: %v", err)
	}
	out := make(map[string]int64, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		if !hasAnyPrefix(k, volatilePrefixes) {
			out[k] = kv.ModRevision
		}
	}
	return out
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// diffSnapshots lists keys added, removed or rewritten between two
// snapshots, sorted.
func diffSnapshots(before, after map[string]int64) []string {
	var out []string
	for k, rev := range after {
		old, ok := before[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("added %s (mod revision %d)", k, rev))
		case old != rev:
			out = append(out, fmt.Sprintf("rewritten %s (mod revision %d -> %d)", k, old, rev))
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, "deleted "+k)
		}
	}
	sort.Strings(out)
	return out
}

// settledSnapshot waits until the server's start-up writes are done (the
// kubernetes Service exists and two snapshots 300 ms apart agree) and
// returns the snapshot.
func settledSnapshot(t testing.TB, cli *clientv3.Client) map[string]int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	prev := snapshot(t, cli)
	for {
		time.Sleep(300 * time.Millisecond)
		cur := snapshot(t, cli)
		_, hasService := cur["/registry/services/specs/default/kubernetes"]
		diff := diffSnapshots(prev, cur)
		if hasService && len(diff) == 0 {
			return cur
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd contents did not settle within 30 s: %v", diff)
		}
		prev = cur
	}
}

// caPool returns a pool holding the PEM certificates in pemData.
func caPool(t testing.TB, pemData []byte) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		t.Fatal("no CA certificate in the PEM data")
	}
	return pool
}

// tlsClient returns an HTTP client trusting pool and presenting certs.
func tlsClient(t testing.TB, pool *x509.CertPool, certs ...tls.Certificate) *http.Client {
	t.Helper()
	c := &http.Client{
		Timeout: requestTimeout,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs:      pool,
			Certificates: certs,
			MinVersion:   tls.VersionTLS12,
		}},
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// binary returns the kubeboot binary, built once per test binary.
func binary(t testing.TB) string {
	t.Helper()
	bin, err := harness.Binary()
	if err != nil {
		t.Fatalf("building kubeboot: %v", err)
	}
	return bin
}

// runResult is what a kubeboot process that exited left behind.
type runResult struct {
	exitCode int
	stdout   string
	stderr   string
	// started: the process started serving and was killed.
	started bool
}

// runKubeboot runs the binary with args, expecting it to refuse to start,
// and returns once it has exited. A process that starts serving instead
// (it prints "serving on https://") is killed at once and reported as
// started, with the test failed; one still running after processTimeout is
// killed and fails the test.
func runKubeboot(t testing.TB, args ...string) runResult {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	var stdout, stderr harness.LockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	cmdline := "kubeboot " + strings.Join(args, " ")
	deadline := time.After(processTimeout)
	for {
		select {
		case err := <-exited:
			res := runResult{stdout: stdout.String(), stderr: stderr.String()}
			if err != nil {
				ee, ok := err.(*exec.ExitError)
				if !ok {
					t.Fatalf("%s: %v", cmdline, err)
				}
				res.exitCode = ee.ExitCode()
			}
			return res
		case <-deadline:
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("%s: still running after %s (killed): it did not refuse\nstderr:\n%s", cmdline, processTimeout, tail(stderr.String(), 3000))
		case <-time.After(pollInterval):
			if strings.Contains(stderr.String(), "serving on https://") {
				_ = cmd.Process.Kill()
				<-exited
				t.Errorf("%s: started serving instead of refusing (killed)\nstderr:\n%s", cmdline, tail(stderr.String(), 3000))
				return runResult{stdout: stdout.String(), stderr: stderr.String(), started: true}
			}
		}
	}
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// refusedInOneLine runs kubeboot with args and checks that it failed with
// one line on stderr saying want.
func refusedInOneLine(t *testing.T, want string, args ...string) {
	t.Helper()
	res := runKubeboot(t, args...)
	if lines := stderrLines(res.stderr); res.exitCode == 0 || len(lines) != 1 || !strings.Contains(res.stderr, want) {
		t.Errorf("kubeboot %s: exit %d, stderr %q; want one line saying %q", strings.Join(args, " "), res.exitCode, res.stderr, want)
	}
}

// stderrLines returns the non-empty lines of s.
func stderrLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// hostAddress returns a non-loopback IPv4 address of this machine, for
// --advertise-address: the server publishes it in the kubernetes endpoints,
// and any packet to it stays on this machine. It returns "" when there is
// none; the server then picks the default-route address itself.
func hostAddress() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip4 := ipn.IP.To4(); ip4 != nil && ip4.IsGlobalUnicast() && !ip4.IsLoopback() {
			return ip4.String()
		}
	}
	return ""
}

// serveFlags are the flags every kubeboot process in these tests gets
// after `apiserver --data-dir DIR`: it listens only on 127.0.0.1, on a port
// the kernel picks, with an explicit service range (so no default-range
// warning is logged) and, when the machine has one, its own address to
// advertise.
func serveFlags() []string {
	args := []string{"--bind-address", "127.0.0.1", "--secure-port", "0", "--service-cluster-ip-range", "10.0.0.0/24"}
	if a := hostAddress(); a != "" {
		args = append(args, "--advertise-address", a)
	}
	return args
}

// apiserverArgs is the full command line of `kubeboot apiserver` on
// dataDir with serveFlags and then extra.
func apiserverArgs(dataDir string, extra ...string) []string {
	args := append([]string{"apiserver", "--data-dir", dataDir}, serveFlags()...)
	return append(args, extra...)
}

// writeUnreachableAdminKubeconfig writes dataDir/admin.kubeconfig, an
// admin kubeconfig of a server that is not running.
func writeUnreachableAdminKubeconfig(t *testing.T, dataDir string) {
	t.Helper()
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	kubeconfig.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	kubeconfig.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kubeconfig.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*kubeconfig, filepath.Join(dataDir, "admin.kubeconfig")); err != nil {
		t.Fatal(err)
	}
}
