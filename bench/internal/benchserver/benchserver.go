// Package benchserver starts the control planes the benchmarks under bench/
// measure, and reads what their processes use: kubeboot, built from this
// module and serving on a free port of 127.0.0.1, and the peer, the
// upstream control plane it replaces (etcd 3.7.3, kube-apiserver,
// kube-controller-manager and kube-scheduler 1.37.2), built from the module
// graph.
//
// A benchmark describes each control plane once, which finds or builds its
// binaries, and starts it as often as it needs:
//
//	kubeboot := benchserver.APIServer(b, time.Minute, "--service-cluster-ip-range", cidr)
//	for range b.N {
//		srv := kubeboot.Start(b)
//		// ... measure, and read benchserver.MemoryOf(b, srv.PID()) ...
//		benchserver.Stop(b, srv, 30*time.Second)
//	}
//
// Each benchmark keeps its own flags, -peer among them: what its peer is
// and what it reports differ. APIServer and Server need the test binary's
// TestMain to call harness.Main (see harness.Binary).
package benchserver

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/test/harness"
)

// serving are the flags every benchmark gives kubeboot: it serves on a free
// port of 127.0.0.1, which clients read from its admin kubeconfig.
var serving = []string{"--bind-address", "127.0.0.1", "--secure-port", "0"}

// Kubeboot is a kubeboot command line that a benchmark starts once or in
// every iteration.
type Kubeboot struct {
	bin, command string
	timeout      time.Duration
	args         []string
}

// APIServer returns `kubeboot apiserver` serving on a free port of
// 127.0.0.1 with args added, which Start waits up to timeout to be ready.
// The binary is harness.Binary's: $KUBEBOOT_BIN, or one built from this
// module once per test binary. It fails tb if there is none.
func APIServer(tb testing.TB, timeout time.Duration, args ...string) Kubeboot {
	tb.Helper()
	return newKubeboot(tb, "apiserver", timeout, args)
}

// Server is APIServer for `kubeboot server`, which runs the controller
// manager and the scheduler in its process, and passes components on to
// them.
func Server(tb testing.TB, timeout time.Duration, components Components, args ...string) Kubeboot {
	tb.Helper()
	return newKubeboot(tb, "server", timeout, slices.Concat(args, components.kubebootFlags()))
}

func newKubeboot(tb testing.TB, command string, timeout time.Duration, args []string) Kubeboot {
	tb.Helper()
	bin, err := harness.Binary()
	if err != nil {
		tb.Fatalf("kubeboot binary: %v", err)
	}
	return Kubeboot{bin: bin, command: command, timeout: timeout, args: slices.Concat(serving, args)}
}

// Start starts k on a new data dir and waits until its /readyz is 200; it
// fails tb if the process exits or the timeout passes first. The process is
// killed when tb ends if it still runs; Stop stops it cleanly before that.
func (k Kubeboot) Start(tb testing.TB) *harness.APIServer {
	tb.Helper()
	return k.StartIn(tb, filepath.Join(tb.TempDir(), "data"))
}

// StartIn is Start on dataDir; on a stopped server's DataDir it restarts
// that server.
func (k Kubeboot) StartIn(tb testing.TB, dataDir string) *harness.APIServer {
	tb.Helper()
	return harness.StartReady(tb, k.timeout, k.bin, k.command, dataDir, k.args...)
}

// Stop sends srv SIGTERM and waits up to timeout for it to exit; it fails
// tb unless srv exits with status 0 in time.
func Stop(tb testing.TB, srv *harness.APIServer, timeout time.Duration) {
	tb.Helper()
	if err := srv.Terminate(timeout); err != nil {
		tb.Fatalf("stopping kubeboot in %s: %v", srv.DataDir, err)
	}
}

// Components are flags for the API server, the controller manager and
// the scheduler, given alike to both control planes: `kubeboot server`
// takes the API server's as its own and passes the others to the
// components it runs in its process (Server), the peer to its processes
// (BuildPeerControlPlane).
type Components struct {
	APIServer, ControllerManager, Scheduler []string
}

// kubebootFlags are the flags of `kubeboot server` that pass c on.
func (c Components) kubebootFlags() []string {
	flags := slices.Clone(c.APIServer)
	for _, f := range c.ControllerManager {
		flags = append(flags, "--controller-manager-arg="+f)
	}
	for _, f := range c.Scheduler {
		flags = append(flags, "--scheduler-arg="+f)
	}
	return flags
}

// ClientLimits are a component's flags that set how many requests per
// second its clients send: --kube-api-qps qps and --kube-api-burst twice
// that.
func ClientLimits(qps int) []string {
	return []string{fmt.Sprintf("--kube-api-qps=%d", qps), fmt.Sprintf("--kube-api-burst=%d", 2*qps)}
}

// PeerAPIServer is the peer's kube-apiserver as a benchmark starts it: on
// an etcd member of its own that runs in the benchmark's process, so that
// the figures of the apiserver's process are its own alone.
type PeerAPIServer struct {
	bin  string
	args []string
}

// BuildPeerAPIServer builds kube-apiserver into a temporary directory of tb
// and returns it with args added to (or overriding) the flags
// harness.StartPeer gives it. It fails tb if the build fails.
func BuildPeerAPIServer(tb testing.TB, args ...string) PeerAPIServer {
	tb.Helper()
	bin, err := harness.BuildPeer(tb.TempDir())
	if err != nil {
		tb.Fatalf("building the peer: %v", err)
	}
	return PeerAPIServer{bin: bin, args: args}
}

// Start starts a new etcd member and p on it, their files in a new
// directory, and returns once the apiserver is ready. Both are stopped when
// tb ends; the returned Peer's Stop stops the apiserver before that.
func (p PeerAPIServer) Start(tb testing.TB) *harness.Peer {
	tb.Helper()
	dir := tb.TempDir()
	return harness.StartPeer(tb, p.bin, dir, harness.StartEtcd(tb, filepath.Join(dir, "etcd")), p.args...)
}

// PeerControlPlane is the peer control plane, what `kubeboot server`
// replaces, as a benchmark starts it: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler, four processes.
type PeerControlPlane struct {
	bins       harness.PeerBinaries
	components Components
}

// BuildPeerControlPlane builds the peer control plane into a temporary
// directory of tb and returns it with components added to the flags of its
// controller manager and scheduler. It fails tb if a build fails.
func BuildPeerControlPlane(tb testing.TB, components Components) PeerControlPlane {
	tb.Helper()
	bins, err := harness.BuildPeerControlPlane(tb.TempDir())
	if err != nil {
		tb.Fatalf("building the peer control plane: %v", err)
	}
	return PeerControlPlane{bins: bins, components: components}
}

// Start starts p with its files in a new directory and returns once its
// /readyz is 200 and both components lead. It is stopped when tb ends.
func (p PeerControlPlane) Start(tb testing.TB) *harness.PeerControlPlane {
	tb.Helper()
	return harness.StartPeerControlPlane(tb, p.bins, tb.TempDir(),
		harness.PeerArgs{APIServer: p.components.APIServer, ControllerManager: p.components.ControllerManager, Scheduler: p.components.Scheduler})
}
