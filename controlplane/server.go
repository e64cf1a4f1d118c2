package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/capabilities"

	"github.com/kubeboot/kubeboot/internal/apiserver"
	"github.com/kubeboot/kubeboot/internal/apiserver/etcdstore"
	"github.com/kubeboot/kubeboot/internal/apiserver/reconcilers"
	"github.com/kubeboot/kubeboot/internal/platform/auditpolicy"
	"github.com/kubeboot/kubeboot/internal/platform/carotation"
	"github.com/kubeboot/kubeboot/internal/platform/cpulabels"
	"github.com/kubeboot/kubeboot/internal/platform/etcd"
	"github.com/kubeboot/kubeboot/internal/platform/nodejoin"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
	"github.com/kubeboot/kubeboot/internal/platform/secretsencryption"
	"github.com/kubeboot/kubeboot/internal/platform/sharedobjects"
)

// Server is a control plane ready to Run.
type Server struct {
	cfg     *completedConfig
	api     *apiserver.Server
	etcd    *etcd.Server     // nil with external etcd
	etcdCli *clientv3.Client // owned here only for external etcd
	// etcdStarted is closed once startEtcd's member has started or the
	// cluster was dialed, or that failed; stopEtcdStart abandons it.
	etcdStarted   chan struct{}
	stopEtcdStart context.CancelFunc
	// snapshotsChanged has a value once a scheduled snapshot changed the
	// snapshots (SnapshotsChanged).
	snapshotsChanged chan struct{}
	// encryptionSynced is closed once the server has first synced with
	// the cluster's encryption record; nil without --secrets-encryption.
	encryptionSynced chan struct{}
	// joining is a first start's join of a cluster (--server).
	joining  *joining
	listener net.Listener
	url      string
	admin    *rest.Config
	ca       *pki.KeyPair
	// checkpoint is what Reset returns the stored objects to.
	checkpoint   *etcdstore.Checkpoint
	checkpointMu sync.Mutex
	ready        chan struct{}
	// published is closed once the kubernetes Service exists and lists
	// this apiserver.
	published chan struct{}
	// unpublished says why published is not closed yet (an error), for a
	// harness's error when it waits too long.
	unpublished atomic.Pointer[error]
	// componentsReady is closed once every ReadyComponent is ready.
	componentsReady chan struct{}
	// sharedObjects holds the one copy of each Pod and Node version that
	// the apiserver's and the in-process components' informers share; nil
	// without components.
	sharedObjects *sharedobjects.Pool
	// notifySocket is $NOTIFY_SOCKET as New found it, for READY=1.
	notifySocket string
	// nodeName is the server's own Node's (TieNode), "" while it has
	// none: the Events about the server go to it.
	nodeName  atomic.Value
	ran       bool // Run was called: the generic server destroys its own storage
	closeOnce sync.Once
}

// New prepares the data directory, certificates and admin kubeconfig,
// starts embedded etcd (or connects to the external cluster), and builds
// the API server. On error everything it started is stopped.
func New(ctx context.Context, c CompletedConfig) (_ *Server, err error) {
	if c.completedConfig == nil {
		return nil, errors.New("controlplane: New needs a config from Config.Complete")
	}
	cfg := c.completedConfig
	if cfg.ClusterReset {
		return nil, errors.New("controlplane: a config with ClusterReset is for ResetCluster, not New")
	}
	s := &Server{cfg: cfg, ready: make(chan struct{}), published: make(chan struct{}), componentsReady: make(chan struct{}), notifySocket: takeNotifySocket(),
		snapshotsChanged: make(chan struct{}, 1)}
	if cfg.secretsEncryptionConfig {
		s.encryptionSynced = make(chan struct{})
	}

	defer func() {
		if err != nil {
			if s.joining != nil {
				s.joining.abandon(ctx)
			}
			s.close()
		}
	}()
	// A join is checked before anything is written: a refused one leaves
	// no data dir behind.
	if cfg.cluster != nil && cfg.cluster.joinServer != "" {
		if s.joining, err = join(ctx, cfg); err != nil {
			return nil, err
		}
	}
	if err := prepareDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	if err := clearResetMarker(cfg.DataDir); err != nil {
		return nil, err
	}
	if err := recordStorage(cfg.DataDir); err != nil {
		return nil, err
	}
	if rotated, err := carotation.Apply(PKIDirIn(cfg.DataDir), time.Now()); err != nil {
		return nil, fmt.Errorf("taking the cluster's rotated CAs: %w", err)
	} else if rotated {
		klog.FromContext(ctx).Info("Took the cluster's rotated CAs (kubeboot certificate rotate-ca): the certificates they did not sign are issued anew", "pki", PKIDirIn(cfg.DataDir))
	}
	// Read by Pod validation; as kube-apiserver's Run, before serving.
	capabilities.Setup(cfg.AllowPrivileged, 0)
	if cfg.secretsEncryptionConfig {
		if created, err := secretsencryption.Ensure(cfg.Etcd.EncryptionProviderConfigFilepath, cfg.SecretsEncryptionProvider, time.Now()); err != nil {
			return nil, fmt.Errorf("--secrets-encryption: %w", err)
		} else if created {
			klog.FromContext(ctx).Info("Secrets are encrypted at rest with a new key", "config", cfg.Etcd.EncryptionProviderConfigFilepath)
		}
	}
	if cfg.defaultAuditPolicy {
		if created, err := auditpolicy.Ensure(cfg.Audit.PolicyFile); err != nil {
			return nil, fmt.Errorf("the default audit policy: %w", err)
		} else if created {
			klog.FromContext(ctx).Info("Audit events are recorded with kubeboot's policy", "policy", cfg.Audit.PolicyFile, "log", cfg.Audit.LogOptions.Path)
		}
	}
	serving := cfg.SecureServing
	l, err := net.Listen("tcp", net.JoinHostPort(serving.BindAddress.String(), strconv.Itoa(serving.BindPort)))
	if err != nil {
		return nil, fmt.Errorf("--secure-port %d on --bind-address %s: %w", serving.BindPort, serving.BindAddress, err)
	}
	s.listener = newClosingListener(l)
	certs, err := ensureCertificates(cfg, s.listener.Addr().(*net.TCPAddr).Port)
	if err != nil {
		return nil, err
	}
	s.url = certs.serverURL
	s.admin = certs.adminConfig
	s.ca = certs.ca

	etcdClient := s.startEtcd(ctx)
	if cfg.anyComponent(func(n Needs) bool { return n.SharedObjects }) {
		s.sharedObjects = sharedobjects.New()
	}
	res := apiserver.Resources{
		Listener:      s.listener,
		ClientCAFiles: certs.clientCAFiles,
		LoopbackCert:  certs.loopback.CertPEM,
		LoopbackKey:   certs.loopback.KeyPEM,
		LoopbackCA:    certs.ca.CertPEM,

		ProxyClientCertFile: certs.frontProxyCert,
		ProxyClientKeyFile:  certs.frontProxyKey,
		RequestHeaderCA:     certs.frontProxyCA.CertPEM,

		KubeletClientCertFile: certs.kubeletClientCert,
		KubeletClientKeyFile:  certs.kubeletClientKey,

		Etcd:          s.takeEncryption(ctx, etcdClient),
		SharedObjects: s.sharedObjects,
	}
	join := s.joinEndpoints()
	res.WrapHandler = func(next http.Handler) http.Handler { return cfg.wrapEndpoints(join.Wrap(next)) }
	if cfg.embeddedEtcd() {
		res.ReadyzChecks = append(res.ReadyzChecks, s.etcdAlarmsCheck())
	}
	if s.encryptionSynced != nil {
		res.ReadyzChecks = append(res.ReadyzChecks, s.encryptionSyncedCheck())
	}
	s.api, err = apiserver.New(cfg.apiserver, res)
	if err != nil {
		return nil, err
	}
	if err := s.publishFlags(); err != nil {
		return nil, fmt.Errorf("publishing the components' settings: %w", err)
	}
	return s, nil
}

// dialEtcd connects to an external etcd cluster and checks it answers.
func dialEtcd(ctx context.Context, c storagebackend.TransportConfig) (*clientv3.Client, error) {
	tlsInfo := transport.TLSInfo{CertFile: c.CertFile, KeyFile: c.KeyFile, TrustedCAFile: c.TrustedCAFile}
	cc := clientv3.Config{Endpoints: c.ServerList, DialTimeout: 20 * time.Second, Logger: quietEtcdClientLogger()}
	if c.CertFile != "" || c.KeyFile != "" || c.TrustedCAFile != "" {
		tc, err := tlsInfo.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("--etcd-cafile/--etcd-certfile/--etcd-keyfile: %w", err)
		}
		cc.TLS = tc
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("--etcd-servers %v: %w", c.ServerList, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := cli.Get(pctx, "health"); err != nil {
		cli.Close()
		return nil, fmt.Errorf("--etcd-servers %v: etcd does not answer: %w", c.ServerList, err)
	}
	return cli, nil
}

// URL is the https URL the server serves on.
func (s *Server) URL() string { return s.url }

// AdminConfig returns a client config of the super admin
// (super-admin.kubeconfig's certificate, system:masters), whose rights no
// RBAC change can take away: for the process's own set-up (the host's
// node) and tests.
func (s *Server) AdminConfig() *rest.Config { return rest.CopyConfig(s.admin) }

// WriteUserKubeconfig writes to path (0600) a kubeconfig that
// authenticates as user in groups with a client certificate the cluster
// CA signs, for a client of the server in another process or on another
// host.
func (s *Server) WriteUserKubeconfig(path, user string, groups []string) error {
	if user == "" {
		return errors.New("a user name is required")
	}
	kp, err := pki.NewClient(s.ca, user, groups)
	if err != nil {
		return err
	}
	return s.WriteKubeconfig(path, kp)
}

// AgentCertificate signs a client certificate for node's agent
// (nodejoin.AgentUser): what the node's process runs beside its kubelet
// acts as.
func (s *Server) AgentCertificate(node string) (*pki.KeyPair, error) {
	return pki.NewClient(s.ca, nodejoin.AgentUser(node), []string{nodejoin.AgentsGroup})
}

// WriteKubeconfig writes a kubeconfig for this server that authenticates
// with kp to path.
func (s *Server) WriteKubeconfig(path string, kp *pki.KeyPair) error {
	return pki.WriteKubeconfig(path, ClusterName, s.url, s.admin.CAData, kp)
}

// UserConfig returns a client config that authenticates as user in groups,
// with a client certificate the cluster CA signs in memory: what a test
// needs to act as someone other than the admin (RBAC checks).
func (s *Server) UserConfig(user string, groups []string) (*rest.Config, error) {
	if user == "" {
		return nil, errors.New("a user name is required")
	}
	kp, err := pki.NewClient(s.ca, user, groups)
	if err != nil {
		return nil, err
	}
	cfg := rest.AnonymousClientConfig(s.admin)
	cfg.CAData = s.admin.CAData
	cfg.CertData, cfg.KeyData = kp.CertPEM, kp.KeyPEM
	return cfg, nil
}

// resetKeeps are the keys, below the etcd prefix, that Reset leaves as
// they are: the control plane's own moving state. Leases in the system
// namespaces are heartbeats and leader locks (apiservers, controllers,
// nodes), masterleases the kubernetes endpoints' liveness, and
// kube-system's ServiceAccounts and Secrets the in-process controllers'
// credentials: turned back or recreated with a new UID, their tokens
// would stop working.
var resetKeeps = []string{
	"masterleases/",
	"leases/kube-system/",
	"leases/kube-node-lease/",
	"serviceaccounts/kube-system/",
	"secrets/kube-system/",
}

// Checkpoint records every object the server stores now; Reset returns
// the stored objects to it.
func (s *Server) Checkpoint(ctx context.Context) error {
	cp, err := etcdstore.NewCheckpoint(ctx, s.etcdCli, s.cfg.Etcd.StorageConfig.Prefix, resetKeeps...)
	if err != nil {
		return err
	}
	s.checkpointMu.Lock()
	defer s.checkpointMu.Unlock()
	s.checkpoint = cp
	return nil
}

// Reset returns the stored objects to the last Checkpoint: objects created
// since are deleted, objects changed or deleted since are written back
// (with new resourceVersions), except the control plane's own leases and
// credentials (resetKeeps). Clients and informers see it as events.
func (s *Server) Reset(ctx context.Context) error {
	s.checkpointMu.Lock()
	defer s.checkpointMu.Unlock()
	if s.checkpoint == nil {
		return errors.New("reset without a checkpoint")
	}
	deleted, written, err := s.checkpoint.Restore(ctx, s.etcdCli)
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Reset the stored objects to the checkpoint", "deleted", deleted, "written", written)
	return nil
}

// AdvertiseAddress is the address the server's peers and nodes reach it
// at (--advertise-address, resolved).
func (s *Server) AdvertiseAddress() netip.Addr { return s.cfg.apiserver.AdvertiseAddress }

// DialCluster is how the server connects to the cluster's network (its
// nodes' kubelets and Pods): the component's Needs.Egress that routes it
// (agents' tunnels), or nil for directly.
func (s *Server) DialCluster() utilnet.DialFunc { return s.cfg.apiserver.Egress }

// DataDir returns Config.DataDir, defaulted.
func (s *Server) DataDir() string { return s.cfg.DataDir }

// AdminKubeconfig is the path of the admin kubeconfig: as kubeadm's
// admin.conf, a user in group kubeadm:cluster-admins, which the
// ClusterRoleBinding of that name makes cluster-admin.
// super-admin.kubeconfig beside it is system:masters.
func (s *Server) AdminKubeconfig() string { return AdminKubeconfigIn(s.cfg.DataDir) }

// AdminKubeconfigIn is the path of the admin kubeconfig of a server whose
// data dir is dataDir (Server.AdminKubeconfig).
func AdminKubeconfigIn(dataDir string) string { return filepath.Join(dataDir, adminKubeconfigName) }

// Ready is closed once /readyz answers 200.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Published is closed once the bootstrap controller, which starts after
// Ready, has created the kubernetes Service and published this apiserver
// in its EndpointSlice (with --endpoint-reconciler-type=none, once the
// Service exists): the state a test harness calls fresh.
func (s *Server) Published() <-chan struct{} { return s.published }

// NotPublished says what Published still waits for: the last check's
// answer, or nil once published or before the first check.
func (s *Server) NotPublished() error {
	if err := s.unpublished.Load(); err != nil {
		return *err
	}
	return nil
}

// ComponentsReady is closed once every component that becomes ready some
// time after it starts (ReadyComponent: simulated nodes) is ready, after
// Ready; at once without any.
func (s *Server) ComponentsReady() <-chan struct{} { return s.componentsReady }

// watchComponentsReady closes componentsReady once every ReadyComponent's
// Ready is closed, unless ctx is done first.
func (s *Server) watchComponentsReady(ctx context.Context) {
	for _, c := range s.cfg.components {
		if r, ok := c.Component.(ReadyComponent); ok {
			select {
			case <-r.Ready():
			case <-ctx.Done():
				return
			}
		}
	}
	close(s.componentsReady)
}

// ClientConfig returns a client configuration that authenticates as
// user, one of the components' in-process users (Needs.User), and
// reaches the server in-process.
func (s *Server) ClientConfig(user string) (*rest.Config, error) { return s.api.ClientConfigFor(user) }

// Client is a clientset on ClientConfig(user).
func (s *Server) Client(user string) (kubernetes.Interface, error) {
	config, err := s.ClientConfig(user)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(config)
}

// SharedObjects is the pool in which the server's and the components'
// informers share their Pods and Nodes (Needs.SharedObjects); nil when no
// component shares them.
func (s *Server) SharedObjects() *sharedobjects.Pool { return s.sharedObjects }

// Run serves until ctx is done, then shuts down gracefully and stops etcd.
// The in-process components (Config.ControllerManager, Config.Scheduler)
// start once the server is ready and stop first, while the apiserver
// still serves their last requests (lease releases); then the apiserver
// drains. It returns nil after a clean shutdown. A component that fails
// or stops on its own (kube-controller-manager on a lost leader lease)
// shuts the server down the same way, and Run returns its error.
func (s *Server) Run(ctx context.Context) error {
	s.ran = true
	defer s.close()
	logger := klog.FromContext(ctx)
	componentsCtx, stopComponents := context.WithCancel(ctx)
	componentsDone := make(chan struct{})
	componentFailed := make(chan error, 1)
	go func() {
		defer close(componentsDone)
		select {
		case <-s.ready:
			s.runComponents(componentsCtx, componentFailed)
		case <-componentsCtx.Done():
		}
	}()
	// Also when the apiserver failed: nothing outlives Run.
	defer func() {
		stopComponents()
		waitComponents(logger, componentsDone)
	}()
	// The apiserver stops once the components have.
	apiCtx, stopAPI := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAPI()
	go func() {
		select {
		case <-ctx.Done():
		case <-apiCtx.Done(): // Run returned
			return
		}
		waitComponents(logger, componentsDone)
		stopAPI()
	}()
	go s.watchReady(apiCtx)
	go s.nudgeWatchCaches(apiCtx)
	go s.renewCertificates(apiCtx)
	go s.syncJoinTokens(apiCtx)
	go s.syncCARotation(apiCtx)
	go s.followSecretsEncryption(apiCtx)
	go s.takeSnapshots(apiCtx)
	go s.reclaimEtcdSpace(apiCtx)
	go func() {
		select {
		case <-s.ready:
			s.removeDeletedServers(apiCtx)
		case <-apiCtx.Done():
		}
	}()
	go s.watchComponentsReady(apiCtx)
	errCh := make(chan error, 1)
	go cpulabels.Do(apiCtx, cpulabels.APIServer, func(ctx context.Context) { errCh <- s.api.Run(ctx) })
	var etcdErr <-chan error
	if s.etcd != nil {
		etcdErr = s.etcd.Err()
	}
	select {
	case err := <-errCh:
		return err
	case err := <-etcdErr:
		return fmt.Errorf("embedded etcd failed: %w", err)
	case err := <-componentFailed:
		// As its binary would exit: the other components stop, then the
		// apiserver drains.
		logger.Error(err, "Stopping the server")
		stopComponents()
		waitComponents(logger, componentsDone)
		stopAPI()
		<-errCh
		return err
	}
}

// waitComponents waits until done is closed, at most
// componentStopTimeout.
func waitComponents(logger klog.Logger, done <-chan struct{}) {
	select {
	case <-done:
	case <-time.After(componentStopTimeout):
		logger.Info("In-process components did not stop in time", "timeout", componentStopTimeout)
	}
}

// watchReady closes s.ready once the server's own /readyz is 200 and tells
// systemd, when it started us, that we are ready.
func (s *Server) watchReady(ctx context.Context) {
	logger := klog.FromContext(ctx)
	select {
	case <-s.api.Ready():
	case <-ctx.Done():
		return
	}
	close(s.ready)
	logger.Info("kubeboot apiserver is ready", "url", s.url, "kubeconfig", s.AdminKubeconfig())
	if err := notifySystemd(s.notifySocket); err != nil {
		logger.Error(err, "Notifying systemd")
	}
	s.watchPublished(ctx)
}

// progressNudgeKey is the etcd key nudgeWatchCaches writes, outside the
// storage prefix as kube-apiserver's compact_rev_key.
const progressNudgeKey = "/kubeboot/watch-progress"

// progressNudgeInterval is how often a starting server writes
// progressNudgeKey: a start takes a few of them.
const progressNudgeInterval = 200 * time.Millisecond

// nudgeWatchCaches writes progressNudgeKey every progressNudgeInterval
// until the server is ready. A starting server's watch caches serve
// their first consistent reads once they know the cluster's current
// revision, which they learn from an event or from a progress
// notification they ask etcd for; etcd 3.7 sends none on a stream where a
// watch starts at a revision yet to come, and each watch cache starts its
// watch at the revision after its list. So on a quiet cluster (a server
// joining one, where the next write may be a Lease renewal 10 s away) a
// cache that listed before the last write waited for the next one: one
// join in twenty took 10 s. A write moves the revision past every such
// start.
func (s *Server) nudgeWatchCaches(ctx context.Context) {
	ticker := time.NewTicker(progressNudgeInterval)
	defer ticker.Stop()
	for {
		select {
		case <-s.ready:
			return
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		wctx, cancel := context.WithTimeout(ctx, progressNudgeInterval)
		if _, err := s.etcdCli.Put(wctx, progressNudgeKey, s.api.Generic.APIServerID); err != nil {
			klog.FromContext(ctx).V(2).Info("Writing the watch progress nudge", "err", err)
		}
		cancel()
	}
}

// watchPublished closes s.published once the kubernetes Service exists
// and, unless no reconciler runs, its EndpointSlice lists this apiserver.
func (s *Server) watchPublished(ctx context.Context) {
	client, err := kubernetes.NewForConfig(s.api.Loopback)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Building the client that waits for the kubernetes Service")
		return
	}
	own := s.cfg.apiserver.AdvertiseAddress.String()
	published := func(ctx context.Context) error {
		// Bounded, so that one slow answer is retried, not waited on.
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, reconcilers.ServiceName, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("the kubernetes Service: %w", err)
		}
		if s.cfg.apiserver.EndpointReconcilerType == reconcilers.None {
			return nil
		}
		slice, err := client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Get(ctx, reconcilers.ServiceName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("the kubernetes EndpointSlice: %w", err)
		}
		var listed []string
		for _, e := range slice.Endpoints {
			listed = append(listed, e.Addresses...)
		}
		if !slices.Contains(listed, own) {
			return fmt.Errorf("the kubernetes EndpointSlice lists %v, not this apiserver's %s", listed, own)
		}
		return nil
	}
	// Fast at first (tests wait on it), slower if the bootstrap controller
	// keeps failing.
	for delay := 10 * time.Millisecond; ; delay = min(delay*3/2, time.Second) {
		err := published(ctx)
		if err == nil {
			break
		}
		s.unpublished.Store(&err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
	s.unpublished.Store(nil)
	close(s.published)
}

// startEtcd starts the embedded member, or dials the external cluster,
// in the background, and returns a function that waits for its client.
// New builds the part of the API server that needs no storage meanwhile:
// a lone member takes 10-50 ms to elect itself.
func (s *Server) startEtcd(ctx context.Context) func() (*clientv3.Client, error) {
	ctx, s.stopEtcdStart = context.WithCancel(ctx)
	s.etcdStarted = make(chan struct{})
	var err error
	go func() {
		defer close(s.etcdStarted)
		if !s.cfg.embeddedEtcd() {
			s.etcdCli, err = dialEtcd(ctx, s.cfg.Etcd.StorageConfig.Transport)
			return
		}
		var member *etcd.Server
		cpulabels.Do(ctx, "etcd", func(ctx context.Context) { member, err = etcd.Start(ctx, s.etcdConfig()) })
		if err != nil {
			return
		}
		s.etcd, s.etcdCli = member, member.Client()
		switch m := s.cfg.cluster; {
		case s.joining != nil:
			// Serving from a learner would fail every write: it is
			// promoted first.
			if err = s.joining.promote(ctx); err == nil {
				s.joining.client.Close()
				s.joining = nil
				klog.FromContext(ctx).Info("Joined the cluster: the etcd member votes", "member", m.name)
			}
		case m != nil:
			// A lone member started before --cluster-init listens for
			// peers on its unix socket only.
			err = member.AdvertisePeerURL(ctx, m.peerURL)
		}
	}()
	return func() (*clientv3.Client, error) {
		<-s.etcdStarted
		return s.etcdCli, err
	}
}

// close stops what New started, in reverse order; it is idempotent.
func (s *Server) close() {
	s.closeOnce.Do(func() {
		if s.api != nil && !s.ran {
			s.api.Generic.Destroy()
		}
		if s.etcdStarted != nil {
			s.stopEtcdStart()
			<-s.etcdStarted
		}
		if s.etcd != nil {
			_ = s.etcd.Close()
		} else if s.etcdCli != nil {
			_ = s.etcdCli.Close()
		}
		if s.listener != nil {
			_ = s.listener.Close()
		}
	})
}

// takeNotifySocket returns $NOTIFY_SOCKET and unsets it. The generic
// server sends READY=1 as soon as it serves, while its post-start hooks
// are still running; systemd must hear it only once /readyz is 200, so
// the library must not find the socket. (Unsetting it also keeps it from
// children, as systemd advises.)
func takeNotifySocket() string {
	socket := os.Getenv("NOTIFY_SOCKET")
	if socket != "" {
		os.Unsetenv("NOTIFY_SOCKET")
	}
	return socket
}

// notifySystemd sends READY=1 to socket (systemd's, or another
// supervisor's speaking its protocol) when one was given.
func notifySystemd(socket string) error {
	if socket == "" {
		return nil
	}
	addr := &net.UnixAddr{Name: socket, Net: "unixgram"}
	if socket[0] == '@' {
		addr.Name = "\x00" + socket[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, addr)
	if err != nil {
		return fmt.Errorf("NOTIFY_SOCKET %q: %w", socket, err)
	}
	defer conn.Close()
	_, err = conn.Write([]byte("READY=1"))
	return err
}

// renewCertificates issues anew, as it starts and then every
// Config.CertificateCheckInterval, the leaf certificates in pki that are
// within pki.RenewBefore of their expiry or were retired (`kubeboot
// certificate rotate`), as a start does: the serving, front-proxy and kubelet client certificates are
// reloaded from their files without a restart; the kubeconfigs are
// rewritten for their next reader.
func (s *Server) renewCertificates(ctx context.Context) {
	logger := klog.FromContext(ctx)
	dir := PKIDirIn(s.cfg.DataDir)
	port := s.listener.Addr().(*net.TCPAddr).Port
	wait.UntilWithContext(ctx, func(context.Context) {
		before, err := pki.Inspect(dir)
		if err != nil {
			logger.Error(err, "Checking the certificates")
			return
		}
		if _, err := ensureCertificates(s.cfg, port); err != nil {
			logger.Error(err, "Renewing the certificates")
			return
		}
		after, err := pki.Inspect(dir)
		if err != nil {
			logger.Error(err, "Checking the certificates")
			return
		}
		now := time.Now()
		for _, c := range after {
			if !slices.ContainsFunc(before, func(b pki.Certificate) bool { return b.Name == c.Name && b.NotAfter.Equal(c.NotAfter) }) {
				logger.Info("Issued a new certificate", "name", c.Name, "notAfter", c.NotAfter)
			}
			// What the server does not renew (a CA), near its expiry, is
			// told where an operator looks: an Event on the server's
			// Node, else on its identity Lease.
			if st := c.Status(now); c.IsCA && (st == "expires soon" || st == "expired") {
				s.api.Recorder().Eventf(s.eventTarget(), corev1.EventTypeWarning, CertificateExpirationWarning,
					"The CA pki/%s.crt (%s) expires on %s: CAs are not renewed on their own (kubeboot certificate check)",
					c.Name, c.Subject, c.NotAfter.UTC().Format(time.DateOnly))
			}
		}
		s.warnUserCertificates(logger, now)
	}, s.cfg.CertificateCheckInterval)
}

// warnUserCertificates tells, as of the CAs, of each certificate in the
// files given by flag (which the server never renews) within
// pki.RenewBefore of its expiry.
func (s *Server) warnUserCertificates(logger klog.Logger, now time.Time) {
	for _, f := range s.cfg.userCertificates() {
		data, err := os.ReadFile(f.path)
		if err != nil {
			logger.Error(err, "Checking a certificate file", "flag", f.flag)
			continue
		}
		certs, err := pki.ParseCertificates(f.path, data)
		if err != nil {
			logger.Error(err, "Checking a certificate file", "flag", f.flag)
			continue
		}
		for _, c := range certs {
			if now.Add(pki.RenewBefore).After(c.NotAfter) {
				s.api.Recorder().Eventf(s.eventTarget(), corev1.EventTypeWarning, CertificateExpirationWarning,
					"The certificate %s in %s (%s) expires on %s: kubeboot renews only the certificates it issued",
					c.Subject, f.path, f.flag, c.NotAfter.UTC().Format(time.DateOnly))
			}
		}
	}
}

// CertificateExpirationWarning is the reason of the Events that tell of a
// CA, or a certificate given by flag, within pki.RenewBefore of its expiry
// (k3s's reason).
const CertificateExpirationWarning = "CertificateExpirationWarning"

// eventTarget is what the Events about the server are recorded on: its
// Node, once it has one, else its identity Lease.
func (s *Server) eventTarget() *corev1.ObjectReference {
	if name, _ := s.nodeName.Load().(string); name != "" {
		return &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: name, UID: types.UID(name)}
	}
	return s.identityLease()
}

// identityLease is the server's identity Lease
// (kube-system/apiserver-<id>), which the Events about it go to when it
// has no Node.
func (s *Server) identityLease() *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: coordinationv1.SchemeGroupVersion.String(), Kind: "Lease",
		Namespace: metav1.NamespaceSystem, Name: s.api.Generic.APIServerID}
}
