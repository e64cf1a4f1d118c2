package harness

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeboot/kubeboot/internal/platform/etcd"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// BuildPeer builds the real kube-apiserver 1.37.2 from this module's
// graph (a go.mod tool dependency) into dir and returns its path. The Go
// build cache keeps its packages, so only the first build compiles.
func BuildPeer(dir string) (string, error) {
	return BuildCommand(filepath.Join(dir, "kube-apiserver"), "k8s.io/kubernetes/cmd/kube-apiserver")
}

// BuildCommand builds the command pkg of this module's graph (one of
// upstream's servers, or etcd) as out and returns out.
func BuildCommand(out, pkg string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return goBuild(root, out, pkg)
}

// Peer is a kube-apiserver process, the oracle of differential tests and
// benchmarks.
type Peer struct {
	// Config is an admin client configuration (a token in system:masters;
	// the serving certificate is self-signed, so not verified).
	Config *rest.Config

	*process
}

// process is a child process whose output is kept.
type process struct {
	name     string
	cmd      *exec.Cmd
	stopOnce sync.Once
	mu       sync.Mutex
	logs     bytes.Buffer
	exited   chan struct{}
}

// startProcess starts bin with args.
func startProcess(bin string, args ...string) (*process, error) {
	p := &process{name: filepath.Base(bin), exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = processWriter{p}, processWriter{p}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// PeerAdminToken is the bearer token of the peer's admin user.
const PeerAdminToken = "kubeboot-differential-admin"

// StartEtcd starts an etcd member in dir serving plain HTTP on a free
// port of 127.0.0.1 and returns its client URL, for --etcd-servers. It is
// stopped when the test ends.
func StartEtcd(t testing.TB, dir string) string {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	member, err := etcd.Start(context.Background(), etcd.Config{Dir: dir, ClientURLs: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = member.Close() })
	return url
}

// StartPeer starts kube-apiserver bin on the etcd at etcdURL with its
// files in dir, with args added to (or overriding) the flags it needs to
// run here, and waits until it is ready. It is stopped when the test ends.
func StartPeer(t testing.TB, bin, dir, etcdURL string, args ...string) *Peer {
	t.Helper()
	p, err := startPeer(bin, dir, etcdURL, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("logs of kube-apiserver in %s:\n%s", dir, p.Logs())
		}
	})
	return p
}

func startPeer(bin, dir, etcdURL string, args ...string) (*Peer, error) {
	saKey, err := pki.EnsureSigningKey(filepath.Join(dir, "pki"), pki.ServiceAccountKeyName)
	if err != nil {
		return nil, err
	}
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(PeerAdminToken+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	flags := append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--token-auth-file=" + tokens,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		// kubeboot's default, as the CIS benchmark asks (kube-apiserver's
		// extends the kubelets' tokens to a year).
		"--service-account-extend-token-expiration=false",
		// Its endpoints would be a loopback address, which Endpoints refuse.
		"--endpoint-reconciler-type=none",
	}, args...)
	proc, err := startProcess(bin, flags...)
	if err != nil {
		return nil, err
	}
	p := &Peer{process: proc}
	p.Config = &rest.Config{
		Host:            "https://127.0.0.1:" + strconv.Itoa(port),
		BearerToken:     PeerAdminToken,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             -1,
		WarningHandler:  rest.NoWarnings{},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.waitReady(ctx); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

type processWriter struct{ p *process }

func (w processWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.logs.Write(b)
}

// PID is the process's ID.
func (p *process) PID() int { return p.cmd.Process.Pid }

// Logs returns what the process printed so far.
func (p *process) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

func (p *Peer) waitReady(ctx context.Context) error {
	client, err := rest.HTTPClientFor(p.Config)
	if err != nil {
		return err
	}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.Config.Host+"/readyz", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("kube-apiserver exited before it was ready:\n%s", p.Logs())
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready: %w\n%s", ctx.Err(), p.Logs())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop kills the process (no-op once stopped).
func (p *process) Stop() {
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
}

// FreePort is a TCP port on 127.0.0.1 nothing listens on right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
