// Package kubeboottest starts a real kubeboot API server, with embedded
// etcd, inside a Go test: no binaries to download, ready in well under a
// second, cleaned up when the test ends.
//
//	func TestMyController(t *testing.T) {
//		srv := kubeboottest.Start(t, kubeboottest.Options{})
//		client := kubernetes.NewForConfigOrDie(srv.Config)
//		// ... run the controller against client ...
//	}
package kubeboottest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/components/kubecontrollermanager"
	"github.com/kubeboot/kubeboot/internal/components/simulatednodes"
)

// DefaultStartTimeout bounds how long Start waits for the server to be
// ready.
const DefaultStartTimeout = time.Minute

// Options configures a test server. The zero value works.
type Options struct {
	// DataDir holds etcd data and certificates. Default: a fresh
	// temporary directory, removed when the server stops (or, if the test
	// binary exits without stopping it, by the next server started).
	DataDir string
	// BindAddress is where the server listens, on a free port.
	// Default: 127.0.0.1.
	BindAddress net.IP
	// AdvertiseAddress is published in the kubernetes Service's endpoints.
	// Default: BindAddress when it is a specific non-loopback address,
	// else the host's default-route address.
	AdvertiseAddress net.IP
	// EtcdServers points at an external etcd; default: embedded etcd.
	EtcdServers []string
	// CRDDir is a directory of CustomResourceDefinition manifests (.yaml,
	// .yml, .json), as envtest's CRDDirectoryPaths: Start returns only
	// once they are established and in discovery.
	CRDDir string
	// StartTimeout bounds the wait for readiness. Default:
	// DefaultStartTimeout.
	StartTimeout time.Duration
	// Controllers are kube-controller-manager controllers to run in the
	// test's process against this server, by name or alias, as its
	// --controllers flag takes them: "garbage-collector-controller"
	// ("garbagecollector") for cascading deletion (foreground, background
	// and orphan), "namespace-controller" ("namespace") for namespaces that
	// finish deleting, "*" for every controller kube-controller-manager
	// runs by default, ... Each controller acts as its own service account
	// in kube-system, as in a kubeadm cluster. Default: none; deleted
	// namespaces are still emptied and removed by the server itself, and
	// owned objects outlive their owners.
	Controllers []string
	// SimulatedNodes runs that many simulated nodes in the test's process
	// (simulated-0, simulated-1, ...; kwok's controllers): Ready nodes
	// whose Pods get IPs, run, become Ready and finish, without
	// containers. No scheduler runs here: a Pod reaches one by its
	// spec.nodeName. Default: none.
	SimulatedNodes int
	// Configure, if set, adjusts the control plane configuration last, for
	// anything the fields above do not cover.
	Configure func(*controlplane.Config)
	// Setup, if set, runs once the server is ready, before Start records
	// the fresh state Reset returns to: objects it creates (fixtures,
	// webhook configurations) are kept by Reset. An error stops the
	// server and fails Start.
	Setup func(context.Context, *Server) error
}

// Server is a running test server.
type Server struct {
	// Config is an admin client configuration (system:masters), without
	// client-side rate limiting: client-go's default of 5 requests/s
	// would set the pace of a test, not the server.
	Config *rest.Config
	// URL is the https URL of the server.
	URL string
	// DataDir is the server's data directory.
	DataDir string
	// Kubeconfig is the path of the admin kubeconfig, for tools like kubectl.
	Kubeconfig string

	cp      *controlplane.Server
	tempDir string // removed by Stop
	cancel  context.CancelFunc
	done    chan error
	stopErr error
	once    sync.Once
}

// Start starts a server and waits until it is ready; it fails the test if
// it cannot. The server stops when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := StartServer(opts)
	if err != nil {
		t.Fatalf("kubeboottest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("kubeboottest: stopping the server: %v", err)
		}
	})
	return s
}

// StartServer is Start without a testing.TB; the caller must Stop it.
// Without Options.DataDir the server's data is in a temporary directory
// that Stop removes; if the process exits first, the next StartServer (of
// any test binary) removes it.
func StartServer(opts Options) (_ *Server, err error) {
	tempDir := ""
	if opts.DataDir == "" {
		if tempDir, err = NewTempDir(); err != nil {
			return nil, err
		}
		opts.DataDir = tempDir
		defer func() {
			if err != nil {
				_ = os.RemoveAll(tempDir)
			}
		}()
	}
	cfg := controlplane.NewConfig()
	cfg.DataDir = opts.DataDir
	cfg.SecureServing.BindAddress = opts.BindAddress
	if cfg.SecureServing.BindAddress == nil {
		cfg.SecureServing.BindAddress = net.IPv4(127, 0, 0, 1)
	}
	cfg.SecureServing.BindPort = 0 // a free port
	cfg.GenericServerRun.AdvertiseAddress = opts.AdvertiseAddress
	cfg.Etcd.StorageConfig.Transport.ServerList = opts.EtcdServers
	cfg.CRDDir = opts.CRDDir
	// As envtest's kube-apiserver: a test server records no audit events.
	cfg.DefaultAudit = false
	// As envtest's etcd: a test's data is thrown away, so a write need not
	// wait for the disk, which other tests' builds keep busy.
	cfg.EtcdUnsafeNoFsync = true
	// envtest's range, as tests written against it may expect
	// (controller-runtime's envtest passes 10.0.0.0/24).
	cfg.ServiceClusterIPRange = "10.0.0.0/24"
	if len(opts.Controllers) > 0 {
		cm, err := kubecontrollermanager.NewOptions()
		if err != nil {
			return nil, err
		}
		flags := kubecontrollermanager.Flags(cm)
		cm.Generic.Controllers = opts.Controllers
		// No lease: the test's servers each run their controllers.
		cm.Generic.LeaderElection.LeaderElect = false
		cfg.Components = append(cfg.Components, kubecontrollermanager.New(cm, flags))
	}
	if opts.SimulatedNodes > 0 {
		nodes := simulatednodes.NewOptions()
		nodes.Count = opts.SimulatedNodes
		// The nodes' pod CIDRs are theirs: the controller manager's node
		// IPAM allocates none (--allocate-node-cidrs is off by default).
		cfg.Components = append(cfg.Components, simulatednodes.New(nodes, nil))
	}
	if opts.Configure != nil {
		opts.Configure(&cfg)
	}
	completed, err := cfg.Complete()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := controlplane.New(ctx, completed)
	if err != nil {
		cancel()
		return nil, err
	}
	admin := srv.AdminConfig()
	admin.QPS = -1
	s := &Server{
		Config:     admin,
		URL:        srv.URL(),
		DataDir:    completed.DataDir,
		Kubeconfig: srv.AdminKubeconfig(),
		cp:         srv,
		tempDir:    tempDir,
		cancel:     cancel,
		done:       make(chan error, 1),
	}
	go func() { s.done <- srv.Run(ctx) }()

	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = DefaultStartTimeout
	}
	deadline := time.After(timeout)
	for _, stage := range []struct {
		ready <-chan struct{}
		what  string
	}{{srv.Ready(), "server"}, {srv.Published(), "kubernetes Service"}, {srv.ComponentsReady(), "simulated nodes"}} {
		select {
		case <-stage.ready:
		case err := <-s.done:
			cancel()
			if err == nil {
				err = errors.New("server stopped before it was ready")
			}
			return nil, err
		case <-deadline:
			why := failingChecks(admin)
			if err := srv.NotPublished(); err != nil && why == "" {
				why = ": " + err.Error()
			}
			_ = s.Stop()
			return nil, fmt.Errorf("%s not ready after %s%s", stage.what, timeout, why)
		}
	}
	if opts.Setup != nil {
		if err := opts.Setup(context.Background(), s); err != nil {
			_ = s.Stop()
			return nil, err
		}
	}
	if err := s.Checkpoint(context.Background()); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// failingChecks returns the server's failing /readyz checks, as
// ": [-]name failed: reason ...", for an error that says what a start
// waited on; empty if it cannot tell.
func failingChecks(cfg *rest.Config) string {
	client, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body, _ := client.RESTClient().Get().AbsPath("/readyz").Param("verbose", "true").DoRaw(ctx)
	var failing []string
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "[-]") {
			failing = append(failing, line)
		}
	}
	if len(failing) == 0 {
		return ""
	}
	return ": " + strings.Join(failing, ", ")
}

// Checkpoint records every object the server stores now as its fresh
// state, for Reset. Start takes one once the server is ready (after
// Options.Setup); take another to make what a suite set up later part of
// the fresh state.
func (s *Server) Checkpoint(ctx context.Context) error { return s.cp.Checkpoint(ctx) }

// Reset returns the server to its last Checkpoint, as a fresh server
// between tests without starting one: objects created since are deleted
// (namespaces and their contents, CRDs and their custom resources, ...),
// objects changed or deleted since are written back. The control plane's
// own heartbeats, leader leases and kube-system's ServiceAccounts and
// Secrets are left as they are. Clients and informers see the changes as
// watch events; a list after Reset returns sees them all.
func (s *Server) Reset(ctx context.Context) error { return s.cp.Reset(ctx) }

// UserConfig returns a client config for user in groups (a client
// certificate signed by the server's CA), to act as someone other than the
// admin, for example to test RBAC rules.
func (s *Server) UserConfig(user string, groups ...string) (*rest.Config, error) {
	cfg, err := s.cp.UserConfig(user, groups)
	if err != nil {
		return nil, err
	}
	cfg.QPS = s.Config.QPS
	return cfg, nil
}

// Stop shuts the server down gracefully and waits for it; it is safe to
// call more than once.
func (s *Server) Stop() error {
	s.once.Do(func() {
		s.cancel()
		s.stopErr = <-s.done
		if s.tempDir != "" {
			s.stopErr = errors.Join(s.stopErr, os.RemoveAll(s.tempDir))
		}
	})
	return s.stopErr
}

// Main is for a package whose tests share one server: call it from
// TestMain. It starts the server (on a temporary data dir unless
// opts.DataDir is set), calls run with it, stops it and exits with run's
// result. run sets up what the tests share and returns m.Run():
//
//	var client kubernetes.Interface
//
//	func TestMain(m *testing.M) {
//		kubeboottest.Main(kubeboottest.Options{}, func(srv *kubeboottest.Server) int {
//			client = kubernetes.NewForConfigOrDie(srv.Config)
//			return m.Run()
//		})
//	}
func Main(opts Options, run func(*Server) int) {
	os.Exit(runMain(opts, run))
}

func runMain(opts Options, run func(*Server) int) int {
	srv, err := StartServer(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeboottest: starting the server:", err)
		return 1
	}
	code := run(srv)
	if err := srv.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "kubeboottest: stopping the server:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
