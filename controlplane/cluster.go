package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/platform/clusterjoin"
	"github.com/kubeboot/kubeboot/internal/platform/etcd"
	"github.com/kubeboot/kubeboot/internal/platform/nodejoin"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
	"github.com/kubeboot/kubeboot/internal/platform/secretsencryption"
)

// Servers on embedded etcd form a cluster as k3s's do: the first starts
// with --cluster-init, the others with --server and --token; each joins
// etcd as a learner, catches up and is promoted before it serves, and
// then serves from its own member.

const (
	// etcdPeerPort is where members reach each other, etcd's and k3s's.
	etcdPeerPort = "2380"
	// tokenFileName is the join token's file in the data dir (k3s's
	// server/token).
	tokenFileName = "token"
	// agentTokenFileName is the agent token's (k3s's agent-token).
	agentTokenFileName = "agent-token"
	// joinedFileName records, in the data dir of a server that joined a
	// cluster, the server it joined through: such a member is refused
	// --cluster-init, which would say it starts a cluster of its own.
	joinedFileName = "joined"
	// etcdPKIDir holds the etcd CA and this member's peer certificate,
	// under pki: kubeadm's etcd CA, of its own so that no certificate of
	// the cluster CA (a kubelet's, an admin's) is taken for a peer's.
	etcdPKIDir = "etcd"
	// promoteTimeout bounds how long a joining member may take to catch
	// up with the leader.
	promoteTimeout = 5 * time.Minute
	// addTimeout bounds how long a join waits for the cluster to take a
	// member (etcd waits until every member has been connected for 5 s).
	addTimeout = time.Minute
)

// sharedFiles are the files, relative to the data dir, that every server
// of a cluster shares and a joining server fetches: the CAs with their
// keys, the service account signing key, the join token and
// --secrets-encryption's configuration.
var sharedFiles = []string{
	filepath.Join(pkiDirName, pki.CAName+".crt"), filepath.Join(pkiDirName, pki.CAName+".key"),
	filepath.Join(pkiDirName, frontProxyCAName+".crt"), filepath.Join(pkiDirName, frontProxyCAName+".key"),
	filepath.Join(pkiDirName, etcdPKIDir, pki.CAName+".crt"), filepath.Join(pkiDirName, etcdPKIDir, pki.CAName+".key"),
	filepath.Join(pkiDirName, pki.ServiceAccountKeyName+".key"),
	tokenFileName,
	agentTokenFileName,
	secretsencryption.ConfigPath(""),
}

// clusterMember is this server's member of a cluster of servers.
type clusterMember struct {
	// name is the etcd member's, peerURL where its peers reach it.
	name, peerURL string
	advertise     netip.Addr
	// joinServer and token are set on a first start with --server.
	joinServer string
	token      clusterjoin.Token
}

func (cc *completedConfig) etcdDir() string { return EtcdDirIn(cc.DataDir) }

// EtcdDirIn is where a server whose data dir is dataDir keeps its
// embedded etcd member (etcd.Dial reaches it there).
func EtcdDirIn(dataDir string) string { return filepath.Join(dataDir, "etcd") }

// TokenFileIn is the server token's file in a server's data dir.
func TokenFileIn(dataDir string) string { return filepath.Join(dataDir, tokenFileName) }

// AgentTokenFileIn is the agent token's file (--agent-token) of the server
// whose data dir is dataDir.
func AgentTokenFileIn(dataDir string) string { return filepath.Join(dataDir, agentTokenFileName) }

// PKIDirIn is the directory of the certificates and keys of the server
// whose data dir is dataDir.
func PKIDirIn(dataDir string) string { return filepath.Join(dataDir, pkiDirName) }

func (cc *completedConfig) etcdPKI(name string) string {
	return filepath.Join(cc.DataDir, pkiDirName, etcdPKIDir, name)
}

// completeCluster resolves --cluster-init, --server and the token into
// this server's member, nil unless its etcd takes peers.
func (cc *completedConfig) completeCluster(advertise netip.Addr) (*clusterMember, error) {
	token, err := clusterjoin.TokenArg("token", cc.Token, cc.TokenFile)
	if err != nil {
		return nil, err
	}
	agentToken, err := clusterjoin.TokenArg("agent-token", cc.AgentToken, cc.AgentTokenFile)
	if err != nil {
		return nil, err
	}
	if agentToken != "" {
		t, err := clusterjoin.ParseUserToken(agentToken, clusterjoin.AgentUser, "")
		if err != nil {
			return nil, fmt.Errorf("--agent-token: %w", err)
		}
		cc.agentToken = &t
	}
	_, err = os.Stat(cc.etcdPKI("peer.crt"))
	clustered := err == nil
	hasData := etcd.HasData(cc.etcdDir())
	switch {
	case cc.ClusterInit && cc.JoinServer != "":
		return nil, errors.New("--cluster-init and --server exclude each other: the first server initializes the cluster, the others join it")
	case (cc.ClusterInit || cc.JoinServer != "") && !cc.embeddedEtcd():
		return nil, errors.New("--cluster-init and --server are for the embedded etcd; servers on --etcd-servers share that cluster already")
	case cc.ClusterInit && joinedThrough(cc.DataDir) != "":
		return nil, fmt.Errorf("--cluster-init: --data-dir %s is a member of the cluster it joined through %s; start it without --cluster-init (a new cluster needs a new data dir)",
			cc.DataDir, joinedThrough(cc.DataDir))
	case cc.ClusterInit && token != "":
		return nil, fmt.Errorf("--token with --cluster-init: the first server writes the cluster's token to %s, for the others to join with", TokenFileIn(cc.DataDir))
	case cc.JoinServer != "" && !clustered && hasData:
		return nil, fmt.Errorf("--server: --data-dir %s holds a cluster of its own (its etcd data); join with a new data dir", cc.DataDir)
	case !cc.ClusterInit && cc.JoinServer == "" && !clustered:
		if token != "" {
			return nil, errors.New("--token needs --server, the server to join")
		}
		return nil, nil
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("the etcd member's name: %w", err)
	}
	m := &clusterMember{
		name:      host + "-" + strings.ReplaceAll(advertise.String(), ":", "-"),
		peerURL:   "https://" + net.JoinHostPort(advertise.String(), etcdPeerPort),
		advertise: advertise,
	}
	if cc.JoinServer != "" && !hasData {
		if token == "" {
			return nil, errors.New("--server needs the cluster's token: --token, --token-file or KUBEBOOT_TOKEN")
		}
		if u, err := url.Parse(cc.JoinServer); err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("--server %q is not the https URL of a server (https://<address>:6443)", cc.JoinServer)
		}
		if m.token, err = clusterjoin.ParseToken(token); err != nil {
			return nil, fmt.Errorf("--token: %w", err)
		}
		if m.token.User != clusterjoin.ServerUser {
			return nil, errors.New("--token: an agent token or a bootstrap token joins agents only; a server joins with the server token (token in a server's --data-dir)")
		}
		m.joinServer = cc.JoinServer
	}
	return m, nil
}

// joinedThrough is the server a data dir's member joined its cluster
// through, or "" if it did not join one.
func joinedThrough(dataDir string) string {
	data, err := os.ReadFile(filepath.Join(dataDir, joinedFileName))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// ensureClusterCertificates writes what a member of a cluster needs: the
// etcd CA and its peer certificate for its advertise address.
func ensureClusterCertificates(cfg *completedConfig, ca *pki.KeyPair) error {
	m := cfg.cluster
	dir := filepath.Join(cfg.DataDir, pkiDirName, etcdPKIDir)
	etcdCA, err := pki.EnsureCA(dir, "kubeboot-etcd-ca")
	if err != nil {
		return fmt.Errorf("etcd CA in %s: %w", dir, err)
	}
	if _, err := pki.EnsureServing(dir, "peer", etcdCA, pki.ServingSpec{
		CommonName: m.name, IPs: []net.IP{net.IP(m.advertise.AsSlice())}, ClientAuth: true}); err != nil {
		return fmt.Errorf("etcd peer certificate in %s: %w", dir, err)
	}
	return nil
}

// etcdConfig is the embedded member's configuration.
func (s *Server) etcdConfig() etcd.Config {
	c := etcd.Config{Dir: s.cfg.etcdDir(), QuotaBackendBytes: s.cfg.EtcdQuotaBackendBytes, UnsafeNoFsync: s.cfg.EtcdUnsafeNoFsync}
	m := s.cfg.cluster
	if m == nil {
		return c
	}
	c.Name = m.name
	c.PeerURLs = []string{m.peerURL}
	c.InitialCluster = m.name + "=" + m.peerURL
	c.PeerTLS = etcd.TLSFiles{CertFile: s.cfg.etcdPKI("peer.crt"), KeyFile: s.cfg.etcdPKI("peer.key"),
		TrustedCAFile: s.cfg.etcdPKI(pki.CAName + ".crt"), ClientCertAuth: true}
	if j := s.joining; j != nil {
		c.InitialCluster = j.member.InitialCluster
		c.Join = true
		c.StartTimeout = promoteTimeout
	}
	return c
}

// joining is a first start's join: the server it joins through and the
// learner it was added as.
type joining struct {
	client *clusterjoin.Client
	member clusterjoin.Member
}

// join verifies the server of --server against the token's CA hash,
// fetches the cluster's shared files, is added as an etcd learner, and
// only then writes the files into the data dir: a refused join writes
// nothing and adds no member.
func join(ctx context.Context, cfg *completedConfig) (*joining, error) {
	m := cfg.cluster
	client, err := clusterjoin.Dial(ctx, m.joinServer, m.token)
	if err != nil {
		return nil, err
	}
	files, err := client.FetchFiles(ctx)
	if err != nil {
		client.Close()
		return nil, err
	}
	addCtx, cancel := context.WithTimeout(ctx, addTimeout)
	defer cancel()
	member, err := client.AddLearner(addCtx, m.name, m.peerURL)
	if err != nil {
		client.Close()
		return nil, err
	}
	j := &joining{client: client, member: member}
	if err := clusterjoin.WriteFiles(cfg.DataDir, files); err != nil {
		j.abandon(ctx)
		return nil, fmt.Errorf("--data-dir %s: writing the cluster's files: %w", cfg.DataDir, err)
	}
	if err := os.WriteFile(filepath.Join(cfg.DataDir, joinedFileName), []byte(m.joinServer+"\n"), 0o600); err != nil {
		j.abandon(ctx)
		return nil, fmt.Errorf("--data-dir %s: %w", cfg.DataDir, err)
	}
	klog.FromContext(ctx).Info("Joining the cluster as an etcd learner", "server", m.joinServer, "member", m.name)
	return j, nil
}

// promote waits until the learner has caught up and is a voting member.
func (j *joining) promote(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, promoteTimeout)
	defer cancel()
	return j.client.Promote(ctx, j.member.ID)
}

// abandon removes the learner of a join that failed after it was added,
// so that the cluster does not wait for a member that never comes.
func (j *joining) abandon(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := j.client.RemoveMember(ctx, j.member.ID); err != nil {
		klog.FromContext(ctx).Error(err, "Removing the etcd learner of a failed join: remove it with kubeboot etcd member remove", "id", fmt.Sprintf("%x", j.member.ID))
	}
	j.client.Close()
}

// joinEndpoints answers the joins of other servers, when its etcd takes
// members, and of agents, when a component approves their kubelets'
// certificates (clusterjoin).
func (s *Server) joinEndpoints() *clusterjoin.Server {
	j := &clusterjoin.Server{
		DataDir:        s.cfg.DataDir,
		TokenFile:      TokenFileIn(s.cfg.DataDir),
		AgentTokenFile: AgentTokenFileIn(s.cfg.DataDir),
		CAFile:         filepath.Join(s.cfg.DataDir, pkiDirName, pki.CAName+".crt"),
		Files:          sharedFiles,
	}
	if s.cfg.cluster != nil {
		j.Members = startedMembers{s}
	}
	if s.cfg.anyComponent(func(n Needs) bool { return n.NodeJoins }) {
		j.Agents = agents{s}
	}
	return j
}

// agents admits agents: nodejoin's binding of the node's name and a
// bootstrap token for its kubelet, and client certificates for its
// kube-proxy and for the node's agent (nodejoin.AgentUser).
type agents struct{ s *Server }

func (a agents) Authenticate(ctx context.Context, token string) error {
	client, err := kubernetes.NewForConfig(a.s.AdminConfig())
	if err != nil {
		return err
	}
	err = nodejoin.CheckJoinToken(ctx, client, token)
	if err != nil && !errors.Is(err, nodejoin.ErrRefused) {
		// The server may not be serving yet: the agent asks again.
		return fmt.Errorf("%w: %w", clusterjoin.ErrNotYet, err)
	}
	return err
}

// syncJoinTokens keeps the data dir's token files at the cluster's record
// of them (clusterjoin.Record), from the time the server is ready, when
// it answers joins.
func (s *Server) syncJoinTokens(ctx context.Context) {
	if j := s.joinEndpoints(); j.Members == nil && j.Agents == nil {
		return
	}
	s.onceReady(ctx, "Keeping the join tokens", func(client kubernetes.Interface) { _ = s.joinTokens(client).Sync(ctx) })
}

// onceReady runs follow with an admin client once the server is ready,
// unless ctx ends first; what says what follow does, for the error of a
// client that cannot be built.
func (s *Server) onceReady(ctx context.Context, what string, follow func(kubernetes.Interface)) {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return
	}
	client, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		klog.FromContext(ctx).Error(err, what)
		return
	}
	follow(client)
}

// joinTokens is the record of the cluster's join tokens and the data
// dir's files of them.
func (s *Server) joinTokens(client kubernetes.Interface) clusterjoin.Record {
	return clusterjoin.Record{Client: client, TokenFile: TokenFileIn(s.cfg.DataDir),
		AgentTokenFile: AgentTokenFileIn(s.cfg.DataDir), AgentToken: s.cfg.agentToken}
}

func (a agents) Admit(ctx context.Context, nodeName, password string) (clusterjoin.AgentCredentials, error) {
	client, err := kubernetes.NewForConfig(a.s.AdminConfig())
	if err != nil {
		return clusterjoin.AgentCredentials{}, err
	}
	token, err := nodejoin.Admit(ctx, client, nodeName, password)
	if errors.Is(err, nodejoin.ErrRefused) {
		return clusterjoin.AgentCredentials{}, err
	} else if err != nil {
		// The server may not be serving yet: the agent asks again.
		return clusterjoin.AgentCredentials{}, fmt.Errorf("%w: %w", clusterjoin.ErrNotYet, err)
	}
	proxy, err := pki.NewClient(a.s.ca, user.KubeProxy, nil)
	if err != nil {
		return clusterjoin.AgentCredentials{}, err
	}
	creds := clusterjoin.AgentCredentials{BootstrapToken: token, ProxyCert: proxy.CertPEM, ProxyKey: proxy.KeyPEM,
		Settings: a.s.cfg.Nodes}
	agent, err := a.s.AgentCertificate(nodeName)
	if err != nil {
		return clusterjoin.AgentCredentials{}, err
	}
	creds.AgentCert, creds.AgentKey = agent.CertPEM, agent.KeyPEM
	return creds, nil
}

// startedMembers is the membership of the member once it has started.
type startedMembers struct{ s *Server }

func (m startedMembers) member() (*etcd.Server, error) {
	<-m.s.etcdStarted
	if m.s.etcd == nil {
		return nil, errors.New("etcd has not started")
	}
	return m.s.etcd, nil
}

func (m startedMembers) AddLearner(ctx context.Context, name, peerURL string) (clusterjoin.Member, error) {
	e, err := m.member()
	if err != nil {
		return clusterjoin.Member{}, err
	}
	return e.AddLearner(ctx, name, peerURL)
}

func (m startedMembers) Promote(ctx context.Context, id uint64) error {
	e, err := m.member()
	if err != nil {
		return err
	}
	return e.Promote(ctx, id)
}

func (m startedMembers) Remove(ctx context.Context, id uint64) error {
	e, err := m.member()
	if err != nil {
		return err
	}
	return e.Remove(ctx, id)
}
