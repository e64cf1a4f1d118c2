package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
)

// DefaultStartTimeout bounds how long Start waits for the member to be
// ready to serve.
const DefaultStartTimeout = 60 * time.Second

// socketName is the member's client socket in its Dir.
const socketName = "etcd.sock"

// Dial is a client of the running member whose data is in dir, through
// its socket there: for commands run beside a server (kubeboot etcd,
// etcd-snapshot, secrets-encrypt) and tests.
func Dial(dir string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{"unix://" + filepath.Join(dir, socketName)},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// singleMemberTickMs is the raft tick of a single-member cluster.
const singleMemberTickMs = 10

// singleMemberCatchUpEntries is how many applied raft entries a lone member
// keeps in memory (etcd's --snapshot-catchup-entries). etcd keeps 5,000
// for a slow follower to catch up from without a snapshot; a lone
// member's peer socket is in its Dir, so it never has one. Each entry is a
// whole write: at start-up the CRDs' (~3 MB held at idle), under load
// thousands of Pods' (docs/performance.md).
const singleMemberCatchUpEntries = 100

// Config describes an embedded etcd member. The zero value plus Dir runs a
// single-member cluster reachable only in-process and on Dir/etcd.sock.
type Config struct {
	// Dir holds the member's data. Required.
	Dir string
	// Name is the member name. Default: "default".
	Name string
	// ClientURLs are extra client listen URLs (e.g. "unix:///path",
	// "https://198.51.100.1:2379"). Default: only unix://<Dir>/etcd.sock.
	ClientURLs []string
	// PeerURLs are the peer listen and advertise URLs. Default: a unix
	// socket in Dir, which no other member can reach (single member).
	PeerURLs []string
	// InitialCluster is "name=peerURL,..." for a multi-member cluster.
	// Default: this member alone.
	InitialCluster string
	// ForceNewCluster starts the member on its data as a new cluster of
	// one, whatever members it had (etcd's --force-new-cluster): a
	// survivor's way out of a lost quorum.
	ForceNewCluster bool
	// Join starts the member as a new member of the running cluster
	// InitialCluster names (etcd's --initial-cluster-state=existing).
	// Ignored when Dir holds a member's data already.
	Join bool
	// ClientTLS and PeerTLS hold certificate files for https URLs.
	ClientTLS, PeerTLS TLSFiles
	// StartTimeout bounds waiting for readiness. Default: DefaultStartTimeout.
	StartTimeout time.Duration
	// LogLevel is etcd's zap level. Default: "error".
	LogLevel string
	// QuotaBackendBytes is the backend size limit; 0 keeps etcd's default.
	QuotaBackendBytes int64
	// UnsafeNoFsync is etcd's --unsafe-no-fsync: writes are not synced to
	// disk, so a crash of the machine (not of the process) may lose or
	// damage data. For data thrown away after a test, as envtest's etcd.
	UnsafeNoFsync bool
}

// TLSFiles names PEM files for a listener.
type TLSFiles struct {
	CertFile, KeyFile, TrustedCAFile string
	// ClientCertAuth requires clients to present a certificate signed by
	// TrustedCAFile.
	ClientCertAuth bool
}

// Server is a running member.
type Server struct {
	etcd      *embed.Etcd
	client    *clientv3.Client
	socket    string
	closeOnce sync.Once
	closing   *atomic.Bool
}

// Start starts a member and waits until it serves, or fails and leaves
// nothing running.
func Start(ctx context.Context, cfg Config) (_ *Server, err error) {
	// etcd panics on some damaged data (it logs at panic level); report
	// that as an error like any other start failure.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("etcd: member in %s failed to start: %v", cfg.Dir, r)
		}
	}()
	if cfg.Dir == "" {
		return nil, errors.New("etcd: a data directory is required")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("etcd: creating data directory: %w", err)
	}
	closing := new(atomic.Bool)
	ec, socket, err := cfg.embedConfig(closing)
	if err != nil {
		return nil, err
	}
	// A socket left by a crash would make the listener fail.
	_ = os.Remove(socket)
	if len(cfg.PeerURLs) == 0 {
		_ = os.Remove(filepath.Join(cfg.Dir, "peer.sock"))
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("etcd: starting member in %s: %w", cfg.Dir, err)
	}
	timeout := cfg.StartTimeout
	if timeout == 0 {
		timeout = DefaultStartTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	ready := e.Server.ReadyNotify()
	if cfg.Join {
		ready = joined(ctx, e)
	}
	select {
	case <-ready:
	case err := <-e.Err():
		closing.Store(true)
		e.Close()
		return nil, fmt.Errorf("etcd: member failed while starting: %w", err)
	case <-timer.C:
		closing.Store(true)
		e.Close()
		return nil, fmt.Errorf("etcd: member in %s not ready after %s (is its cluster reachable?)", cfg.Dir, timeout)
	case <-ctx.Done():
		closing.Store(true)
		e.Close()
		return nil, ctx.Err()
	}
	return &Server{etcd: e, client: v3client.New(e.Server), socket: socket, closing: closing}, nil
}

// joined is closed once a joining member follows a leader and holds the
// cluster's data, or is ready. etcd's readiness waits until the member
// has published its name through raft, and a new member catches up from
// the leader's snapshot (etcd compacts its raft log every 100 entries):
// when the leader applied the member's first publish before cutting that
// snapshot, the member never applies it as an entry of its own and waits
// out etcd's request timeout (7 s) to publish again. The member serves
// the in-process client meanwhile; only its client socket waits.
func joined(ctx context.Context, e *embed.Etcd) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if s := e.Server; s.Leader() != 0 && s.KV().Rev() > 1 {
				close(done)
				return
			}
			select {
			case <-e.Server.ReadyNotify():
				close(done)
				return
			case <-e.Server.StopNotify(): // Start reports why
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return done
}

func (cfg Config) embedConfig(closing *atomic.Bool) (*embed.Config, string, error) {
	ec := embed.NewConfig()
	ec.Dir = cfg.Dir
	ec.ForceNewCluster = cfg.ForceNewCluster
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	name, peer := cfg.Member()
	ec.Name = name
	socket := filepath.Join(cfg.Dir, socketName)
	clientURLs, err := parseURLs(append([]string{"unix://" + socket}, cfg.ClientURLs...))
	if err != nil {
		return nil, "", fmt.Errorf("etcd: client URLs: %w", err)
	}
	ec.ListenClientUrls = clientURLs
	ec.AdvertiseClientUrls = clientURLs
	peers := cfg.PeerURLs
	if len(peers) == 0 {
		peers = []string{peer}
	}
	peerURLs, err := parseURLs(peers)
	if err != nil {
		return nil, "", fmt.Errorf("etcd: peer URLs: %w", err)
	}
	ec.ListenPeerUrls = peerURLs
	ec.AdvertisePeerUrls = peerURLs
	if cfg.InitialCluster != "" {
		ec.InitialCluster = cfg.InitialCluster
	} else {
		ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
		// A lone member has no peers to time out on: short ticks and
		// etcd's shortest election timeout (5 ticks) let it elect itself
		// within 10-50 ms of starting instead of 0.1-1 s. etcd fast-forwards
		// a lone member's election to its last tick, and raft randomizes
		// the remaining ticks between 1 and the timeout's.
		ec.TickMs = singleMemberTickMs
		ec.ElectionMs = 5 * singleMemberTickMs
		ec.SnapshotCatchUpEntries = singleMemberCatchUpEntries
	}
	ec.InitialClusterToken = "kubeboot"
	// One process serves both protocols on the socket; it is not public.
	ec.EnableGRPCGateway = false
	ec.ClientTLSInfo.CertFile = cfg.ClientTLS.CertFile
	ec.ClientTLSInfo.KeyFile = cfg.ClientTLS.KeyFile
	ec.ClientTLSInfo.TrustedCAFile = cfg.ClientTLS.TrustedCAFile
	ec.ClientTLSInfo.ClientCertAuth = cfg.ClientTLS.ClientCertAuth
	ec.PeerTLSInfo.CertFile = cfg.PeerTLS.CertFile
	ec.PeerTLSInfo.KeyFile = cfg.PeerTLS.KeyFile
	ec.PeerTLSInfo.TrustedCAFile = cfg.PeerTLS.TrustedCAFile
	ec.PeerTLSInfo.ClientCertAuth = cfg.PeerTLS.ClientCertAuth
	// A peer is who the CA signed, whatever address its connection comes
	// from: a host with several addresses, NAT or a namespace's loopback
	// may pick one its certificate does not name.
	ec.PeerTLSInfo.SkipClientSANVerify = true
	if cfg.QuotaBackendBytes > 0 {
		ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	}
	level := cfg.LogLevel
	if level == "" {
		level = "error"
	}
	lg, err := newLogger(level, closing)
	if err != nil {
		return nil, "", fmt.Errorf("etcd: logger: %w", err)
	}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	ec.LogLevel = level
	// Membership of an existing data dir is read from disk; "new" only
	// applies to a first start.
	ec.ClusterState = embed.ClusterStateFlagNew
	if cfg.Join {
		ec.ClusterState = embed.ClusterStateFlagExisting
	}
	return ec, socket, nil
}

// Member is the member's name and first peer URL, defaults applied: a
// lone member's peer URL is a unix socket in Dir.
func (cfg Config) Member() (name, peerURL string) {
	name = cfg.Name
	if name == "" {
		name = embed.DefaultName
	}
	if len(cfg.PeerURLs) > 0 {
		return name, cfg.PeerURLs[0]
	}
	return name, "unix://" + filepath.Join(cfg.Dir, "peer.sock")
}

func parseURLs(ss []string) ([]url.URL, error) {
	out := make([]url.URL, 0, len(ss))
	for _, s := range ss {
		u, err := url.Parse(s)
		if err != nil {
			return nil, err
		}
		out = append(out, *u)
	}
	return out, nil
}

// Client returns an in-process client (function calls, no sockets). It is
// closed by Close.
func (s *Server) Client() *clientv3.Client { return s.client }

// Endpoints returns the URLs clients in other processes can dial.
func (s *Server) Endpoints() []string {
	var out []string
	for _, u := range s.etcd.Config().AdvertiseClientUrls {
		out = append(out, u.String())
	}
	return out
}

// Err reports a fatal error of the running member.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops the member; it is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		_ = s.client.Close()
		s.closing.Store(true)
		s.etcd.Close()
		_ = os.Remove(s.socket)
	})
	return nil
}

// Args returns the member's settings as etcd's flags, "--name=value",
// those at etcd's defaults left out, as on etcd's command line for the
// same member (for componentflags).
func (cfg Config) Args() ([]string, error) {
	ec, _, err := cfg.embedConfig(new(atomic.Bool))
	if err != nil {
		return nil, err
	}
	defaults := flagsOf(embed.NewConfig())
	var args []string
	for i, f := range flagsOf(ec) {
		if f.value != "" && f != defaults[i] {
			args = append(args, "--"+f.name+"="+f.value)
		}
	}
	slices.Sort(args)
	return args, nil
}

// flag is one of etcd's flags and its value.
type flag struct{ name, value string }

// flagsOf is ec's settings that Config sets, by etcd's flag names.
func flagsOf(ec *embed.Config) []flag {
	urls := func(us []url.URL) string {
		s := make([]string, len(us))
		for i, u := range us {
			s[i] = u.String()
		}
		return strings.Join(s, ",")
	}
	return []flag{
		{"name", ec.Name}, {"data-dir", ec.Dir},
		{"listen-client-urls", urls(ec.ListenClientUrls)}, {"advertise-client-urls", urls(ec.AdvertiseClientUrls)},
		{"listen-peer-urls", urls(ec.ListenPeerUrls)}, {"initial-advertise-peer-urls", urls(ec.AdvertisePeerUrls)},
		{"initial-cluster", ec.InitialCluster}, {"initial-cluster-state", ec.ClusterState}, {"initial-cluster-token", ec.InitialClusterToken},
		{"heartbeat-interval", strconv.FormatUint(uint64(ec.TickMs), 10)}, {"election-timeout", strconv.FormatUint(uint64(ec.ElectionMs), 10)},
		{"snapshot-catchup-entries", strconv.FormatUint(ec.SnapshotCatchUpEntries, 10)},
		{"cert-file", ec.ClientTLSInfo.CertFile}, {"key-file", ec.ClientTLSInfo.KeyFile},
		{"trusted-ca-file", ec.ClientTLSInfo.TrustedCAFile}, {"client-cert-auth", strconv.FormatBool(ec.ClientTLSInfo.ClientCertAuth)},
		{"auto-tls", strconv.FormatBool(ec.ClientAutoTLS)},
		{"peer-cert-file", ec.PeerTLSInfo.CertFile}, {"peer-key-file", ec.PeerTLSInfo.KeyFile},
		{"peer-trusted-ca-file", ec.PeerTLSInfo.TrustedCAFile}, {"peer-client-cert-auth", strconv.FormatBool(ec.PeerTLSInfo.ClientCertAuth)},
		{"peer-auto-tls", strconv.FormatBool(ec.PeerAutoTLS)},
		{"quota-backend-bytes", strconv.FormatInt(ec.QuotaBackendBytes, 10)},
		{"enable-grpc-gateway", strconv.FormatBool(ec.EnableGRPCGateway)},
		{"force-new-cluster", strconv.FormatBool(ec.ForceNewCluster)}, {"unsafe-no-fsync", strconv.FormatBool(ec.UnsafeNoFsync)},
	}
}
