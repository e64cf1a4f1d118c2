package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/server/options/encryptionconfig"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	kubeoptions "k8s.io/kubernetes/pkg/kubeapiserver/options"

	"github.com/robfig/cron/v3"

	"github.com/kubeboot/kubeboot/internal/apiserver"
	"github.com/kubeboot/kubeboot/internal/apiserver/crdinstall"
	"github.com/kubeboot/kubeboot/internal/apiserver/etcdstore"
	"github.com/kubeboot/kubeboot/internal/apiserver/reconcilers"
	"github.com/kubeboot/kubeboot/internal/apiserver/services"
	"github.com/kubeboot/kubeboot/internal/platform/clusterjoin"
	"github.com/kubeboot/kubeboot/internal/platform/etcd"
	"github.com/kubeboot/kubeboot/internal/platform/etcdsnapshot"
	"github.com/kubeboot/kubeboot/internal/platform/network"
	"github.com/kubeboot/kubeboot/internal/platform/nodesettings"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
	"github.com/kubeboot/kubeboot/internal/platform/progress"
	"github.com/kubeboot/kubeboot/internal/platform/secretsencryption"
)

// Config is a control plane's settings: kube-apiserver's option groups
// where it has one, each the home of its settings, and kubeboot's own.
// NewConfig returns every default; change what differs, then Complete.
// Every field means what it says: a zero port is a free port, a zero
// compaction interval is no compaction.
type Config struct {
	// DataDir holds the embedded etcd data, the generated certificates and
	// admin.kubeconfig (--data-dir). Default: DefaultDataDir().
	DataDir string

	// GenericServerRun is kube-apiserver's generic server group:
	// --advertise-address (the address published in the kubernetes
	// Service's endpoints; if unset, the bind address if it is a specific
	// non-loopback address, else the address of the host's default-route
	// interface), --shutdown-delay-duration,
	// --shutdown-watch-termination-grace-period (default 5s here: how long
	// open watches may delay a stop), --max-requests-inflight,
	// --request-timeout, ...
	GenericServerRun *genericoptions.ServerRunOptions
	// SecureServing is kube-apiserver's secure serving group:
	// --bind-address (default 0.0.0.0), --secure-port (default 6443; 0
	// picks a free port, which Server.URL names), the serving certificate
	// (--tls-cert-file and --tls-private-key-file; default: generated in
	// DataDir's pki, or in --cert-dir; reloaded when the files change),
	// --tls-sni-cert-key, --tls-min-version (default VersionTLS12),
	// --tls-cipher-suites, --tls-curve-preferences.
	SecureServing *genericoptions.SecureServingOptions
	// Etcd is kube-apiserver's etcd group: --etcd-servers (none: etcd
	// runs embedded in DataDir), --etcd-cafile, --etcd-certfile,
	// --etcd-keyfile, --etcd-prefix (/registry),
	// --etcd-compaction-interval (5m; 0 turns compaction off),
	// --watch-cache (on), and encryption at rest:
	// --encryption-provider-config (none) and
	// --encryption-provider-config-automatic-reload.
	Etcd *genericoptions.EtcdOptions
	// ClusterInit is k3s's --cluster-init: the embedded etcd takes peers
	// (https on the advertise address, port 2380, with certificates of
	// its own CA in pki/etcd) and the server writes a join token to
	// token in DataDir for other servers to join with.
	ClusterInit bool
	// JoinServer is --server: the https URL of a server of the cluster
	// this one joins on its first start, with Token. A server restarted
	// on its data dir needs neither.
	JoinServer string
	// Token is --token (or KUBEBOOT_TOKEN): the cluster's join token,
	// K10<CA hash>::server:<password>, as the first server wrote it.
	Token string
	// TokenFile is --token-file: a file holding Token.
	TokenFile string
	// AgentToken is --agent-token (or KUBEBOOT_AGENT_TOKEN): a token
	// that joins agents but not servers, node:<password> or the password
	// alone, k3s's; it becomes the cluster's agent token, which every
	// server writes to agent-token in its DataDir. Empty: the cluster's
	// is kept; agents join with the server token or a bootstrap token
	// (kubeboot token create).
	AgentToken string
	// AgentTokenFile is --agent-token-file: a file holding AgentToken.
	AgentTokenFile string
	// AllowPrivileged is --allow-privileged: Pods may run privileged
	// containers. Default: true, as kubeadm and k3s set it (CNI plugins,
	// kube-proxy and storage drivers run privileged); kube-apiserver's is
	// false. It holds for the whole process: the first server started in
	// it sets it (upstream's capabilities package is process-wide).
	AllowPrivileged bool
	// ClusterReset is k3s's --cluster-reset: instead of serving, make the
	// data dir's etcd member a new cluster of one with its data (a
	// survivor of a lost quorum), or with ClusterResetRestorePath's
	// snapshot; then restart without the flag.
	ClusterReset bool
	// ClusterResetRestorePath is --cluster-reset-restore-path: the
	// snapshot ClusterReset restores.
	ClusterResetRestorePath string
	// EtcdSnapshotDir is --etcd-snapshot-dir. Default: snapshots in
	// DataDir.
	EtcdSnapshotDir string
	// EtcdSnapshotScheduleCron is --etcd-snapshot-schedule-cron: when the
	// server takes a snapshot of its embedded etcd, in cron's five
	// fields. Default: every 12 hours.
	EtcdSnapshotScheduleCron string
	// EtcdSnapshotRetention is --etcd-snapshot-retention: how many
	// scheduled snapshots are kept. Default: 5.
	EtcdSnapshotRetention int
	// EtcdDisableSnapshots is --etcd-disable-snapshots: no scheduled
	// snapshots.
	EtcdDisableSnapshots bool
	// EtcdSnapshotReconcileInterval is
	// --etcd-snapshot-reconcile-interval: how often the snapshots'
	// records (ETCDSnapshotFile objects) are reconciled with the snapshot
	// directory and the bucket, besides after each scheduled snapshot.
	// Default: 10 minutes, k3s's.
	EtcdSnapshotReconcileInterval time.Duration
	// EtcdSnapshotCompress is --etcd-snapshot-compress: scheduled
	// snapshots are kept (and uploaded) as zip archives.
	EtcdSnapshotCompress bool
	// EtcdS3 are k3s's --etcd-s3 flags: snapshots uploaded to an S3
	// bucket too, the scheduled ones pruned there to
	// EtcdSnapshotRetention, and --cluster-reset-restore-path taken from
	// there when it names no local file.
	EtcdS3 etcdsnapshot.S3Options
	// EtcdQuotaBackendBytes is --etcd-quota-backend-bytes: the embedded
	// etcd's database size limit (etcd's --quota-backend-bytes). 0 keeps
	// etcd's, 2 GiB.
	EtcdQuotaBackendBytes int64
	// EtcdUnsafeNoFsync runs the embedded etcd without syncing writes to
	// disk (etcd's --unsafe-no-fsync): a crash of the machine may lose or
	// damage its data. For data a test throws away; kubeboottest sets it,
	// as envtest does for its etcd. No flag sets it.
	EtcdUnsafeNoFsync bool
	// SecretsEncryption is k3s's --secrets-encryption: Secrets are
	// encrypted at rest with a key generated on first start, in a
	// configuration kept in DataDir (encryption/config.yaml), shared by
	// the cluster's servers and reloaded when `kubeboot secrets-encrypt`
	// changes it. It excludes --encryption-provider-config. Default: off.
	SecretsEncryption bool
	// SecretsEncryptionProvider is k3s's --secrets-encryption-provider:
	// the type of the keys --secrets-encryption generates, aescbc or
	// secretbox. Default: aescbc.
	SecretsEncryptionProvider string
	// Audit is kube-apiserver's audit group: --audit-policy-file (none:
	// no events), the log backend (--audit-log-path, --audit-log-maxage,
	// --audit-log-maxbackup, --audit-log-maxsize, --audit-log-format, ...)
	// and the webhook backend (--audit-webhook-config-file, ...).
	//
	// Unlike kube-apiserver's, the log keeps 10 files of 30 days at most
	// (--audit-log-maxbackup, --audit-log-maxage; RKE2's hardened values,
	// the CIS benchmark's minimums), not 100 of a year: about 1 GB.
	Audit *genericoptions.AuditOptions
	// DefaultAudit records audit events, as the CIS benchmark asks (1.2.16
	// to 1.2.19, 3.2.1), when they are not configured: without
	// --audit-policy-file, kubeboot's policy (auditpolicy), written to
	// audit/policy.yaml in DataDir on first start and read from there;
	// without --audit-log-path or a webhook, the log at logs/audit.log in
	// DataDir. Default: on; kubeboottest turns it off.
	DefaultAudit bool

	// ServiceClusterIPRange is --service-cluster-ip-range: one CIDR, or
	// two of different families. Default: kubeadm's 10.96.0.0/12
	// (kube-apiserver's deprecated default is 10.0.0.0/24).
	ServiceClusterIPRange string
	// ServiceNodePortRange is --service-node-port-range. Default:
	// 30000-32767.
	ServiceNodePortRange string
	// KubernetesServiceNodePort, when > 0, makes the kubernetes Service a
	// NodePort Service on that port (--kubernetes-service-node-port).
	KubernetesServiceNodePort int
	// EndpointReconcilerType is --endpoint-reconciler-type: lease,
	// master-count or none. Default: lease.
	EndpointReconcilerType string
	// APIServerCount is --apiserver-count, used by master-count. Default: 1.
	APIServerCount int
	// EndpointLeaseTTL is how long a dead apiserver's endpoint lease lives
	// (--endpoint-lease-ttl). Default: 3s.
	EndpointLeaseTTL time.Duration
	// EndpointReconcileInterval is how often the kubernetes Service and its
	// endpoints are reconciled (--endpoint-reconciler-interval). Default: 1s.
	EndpointReconcileInterval time.Duration
	// RepairInterval is how often the ClusterIP and NodePort repair loops
	// run (--service-ip-repair-interval). Default: 3m.
	RepairInterval time.Duration
	// RepairDeadline bounds the first repair passes, which /readyz waits
	// for; past it the server exits (--service-ip-repair-deadline).
	// Default: 1m.
	RepairDeadline time.Duration

	// Nodes are the cluster's settings that every node runs with (cluster
	// DNS and domain, pod network, local storage, embedded registry
	// mirror, NetworkPolicy): the nodes of `--node` and the agents are
	// told them. ClusterDomain also names the serving certificate's
	// kubernetes.default.svc.<ClusterDomain> and the default service
	// account issuer. Default: ClusterDomain cluster.local, the rest off.
	Nodes NodeSettings

	// Authentication is kube-apiserver's authentication group: client
	// certificates (--client-ca-file: CAs accepted besides the generated
	// one), --token-auth-file, service account tokens
	// (--service-account-issuer, default
	// https://kubernetes.default.svc.<Nodes.ClusterDomain>;
	// --service-account-key-file, default the signing key;
	// --service-account-lookup, --service-account-max-token-expiration,
	// --service-account-extend-token-expiration, ...), bootstrap tokens
	// (--enable-bootstrap-token-auth, off), --api-audiences and
	// --authentication-config.
	Authentication *kubeoptions.BuiltInAuthenticationOptions
	// ServiceAccountSigningKeyFile is --service-account-signing-key-file:
	// the private key that signs service account tokens. Default:
	// pki/sa.key in DataDir, generated on first start.
	ServiceAccountSigningKeyFile string
	// Authorization is kube-apiserver's authorization group
	// (--authorization-mode, default Node,RBAC, and its webhook flags).
	Authorization *kubeoptions.BuiltInAuthorizationOptions
	// Admission is kube-apiserver's admission group
	// (--enable-admission-plugins, --disable-admission-plugins,
	// --admission-control-config-file). Default: kube-apiserver's plugins
	// in its order, and NodeRestriction (as kubeadm and k3s enable it;
	// --disable-admission-plugins=NodeRestriction turns it off).
	Admission *kubeoptions.AdmissionOptions
	// Features is the generic server's feature group
	// (--enable-priority-and-fairness, --profiling,
	// --contention-profiling, --debug-socket-path). Default: API Priority
	// and Fairness on, as kube-apiserver; profiling off (/debug/pprof not
	// served), as the CIS benchmark and k3s have it.
	Features *genericoptions.FeatureOptions

	// CRDDir is --crd-dir: a directory of CustomResourceDefinition
	// manifests installed at start. The server is ready (Server.Ready,
	// /readyz) only once they are established and in discovery.
	CRDDir string
	// CRDs are installed at start after CRDDir's, the same way; each
	// one's Source names it in errors. Default: none.
	CRDs []CRD

	// EventTTL is --event-ttl. Default: 1h.
	EventTTL time.Duration

	// KubeletCertificateAuthority is --kubelet-certificate-authority: the
	// CA bundle the kubelets' serving certificates are verified against
	// when the server reaches them (logs, exec, port-forward, proxy).
	// Default: the cluster CA, which signs the serving certificates of
	// `kubeboot server`'s nodes (their CSRs approved by kubeletserving).
	KubeletCertificateAuthority string

	// CertificateCheckInterval is how often a running server issues anew
	// the leaf certificates in pki that are within 120 days of their expiry
	// or were retired (a start does it too). Default: 1h.
	CertificateCheckInterval time.Duration

	// Components run in the process beside the API server (Component):
	// kube-controller-manager, kube-scheduler, simulated nodes, this
	// host's node. Default: none.
	Components []Component

	// Progress receives how far the steps of a start that can take long
	// have come: restoring a snapshot (ResetCluster), installing the CRDs,
	// simulated nodes coming up. `kubeboot server` shows them on a
	// terminal. Default: nil, nothing receives them.
	Progress func(ProgressUpdate)
}

// ProgressUpdate is how far one step of a start has come.
type ProgressUpdate = progress.Update

// CRD is a CustomResourceDefinition to install at start, with the source
// (file and document) its errors name.
type CRD = crdinstall.CRD

// CompletedConfig is a Config with every setting resolved and checked;
// only Complete makes one, and only New takes one.
type CompletedConfig struct {
	*completedConfig
}

type completedConfig struct {
	Config
	// apiserver is the API server's configuration, resolved from Config
	// once; New hands it over as it is.
	apiserver apiserver.Config
	// components are Config.Components, completed.
	components []completedComponent
	// endpointReconciler is EndpointReconcilerType, parsed.
	endpointReconciler reconcilers.Type
	// componentKubeconfigs are written with the certificates, for the
	// components that serve a port of their own.
	componentKubeconfigs []componentKubeconfig
	// servingCert is set when the serving certificate is generated (no
	// --tls-cert-file): New writes it to SecureServing's files.
	servingCert bool
	// secretsEncryptionConfig is set when New writes the
	// --secrets-encryption configuration, if missing.
	secretsEncryptionConfig bool
	// snapshotSchedule is when scheduled snapshots are taken; nil
	// without them.
	snapshotSchedule cron.Schedule
	// cluster is set when the embedded etcd takes peers (ClusterInit, a
	// join, or a data dir that did either).
	cluster *clusterMember
	// restoreFromS3 is set when ClusterResetRestorePath names a snapshot
	// in EtcdS3's bucket rather than a file.
	restoreFromS3 bool
	// agentToken is AgentToken, parsed; its CA hash is completed when
	// the CA is known. Nil without one.
	agentToken *clusterjoin.Token
	// defaultAuditPolicy is set when New writes kubeboot's audit policy
	// (DefaultAudit) unless the data dir has one.
	defaultAuditPolicy bool
	warnings           []string
}

// Warnings lists what Complete defaulted that a user should know about.
func (c CompletedConfig) Warnings() []string { return c.warnings }

// Defaults, as kube-apiserver's where it has one.
const (
	DefaultSecurePort = 6443
	// DefaultCertificateCheckInterval is how often a running server
	// renews its certificates when they need it.
	DefaultCertificateCheckInterval = time.Hour
)

// NewConfig returns every default of a Config, written once here: the
// flags show them, and Complete resolves what follows from them.
func NewConfig() Config {
	serving := genericoptions.NewSecureServingOptions()
	serving.BindPort = DefaultSecurePort
	// As kube-apiserver's generated certificate, in the data dir's pki.
	serving.ServerCert.CertDirectory = ""
	serving.MinTLSVersion = "VersionTLS12"
	etcd := genericoptions.NewEtcdOptions(storagebackend.NewDefaultConfig(etcdstore.DefaultPrefix, nil))
	// As kube-apiserver's: objects are stored as protobuf.
	etcd.DefaultStorageMediaType = etcdstore.StorageMediaType
	audit := genericoptions.NewAuditOptions()
	audit.LogOptions.MaxAge, audit.LogOptions.MaxBackups = 30, 10
	features := genericoptions.NewFeatureOptions()
	features.EnableProfiling = false
	// As kubeadm and k3s: a node's credentials may change only its own
	// Node and the Pods bound to it.
	admission := kubeoptions.NewAdmissionOptions()
	admission.GenericAdmission.DefaultOffPlugins.Delete("NodeRestriction")
	return Config{
		DataDir:          DefaultDataDir(),
		GenericServerRun: apiserver.NewServerRunOptions(),
		SecureServing:    serving,
		Etcd:             etcd,
		Audit:            audit,
		DefaultAudit:     true,
		AllowPrivileged:  true,

		EtcdSnapshotScheduleCron:      etcdsnapshot.DefaultSchedule,
		EtcdSnapshotRetention:         etcdsnapshot.DefaultRetention,
		SecretsEncryptionProvider:     secretsencryption.AESCBC,
		EtcdS3:                        etcdsnapshot.NewS3Options(),
		EtcdSnapshotReconcileInterval: 10 * time.Minute,

		ServiceClusterIPRange:     network.DefaultServiceClusterIPRange,
		ServiceNodePortRange:      network.DefaultServiceNodePortRange,
		EndpointReconcilerType:    string(reconcilers.Lease),
		APIServerCount:            1,
		EndpointLeaseTTL:          reconcilers.DefaultLeaseTTL,
		EndpointReconcileInterval: reconcilers.DefaultReconcileInterval,
		RepairInterval:            services.DefaultRepairInterval,
		RepairDeadline:            services.DefaultRepairDeadline,
		Nodes:                     NodeSettings{ClusterDomain: nodesettings.DefaultClusterDomain},

		Authentication: apiserver.NewAuthenticationOptions(),
		Authorization:  apiserver.NewAuthorizationOptions(),
		Admission:      admission,
		Features:       features,

		EventTTL:                 apiserver.DefaultEventTTL,
		CertificateCheckInterval: DefaultCertificateCheckInterval,
	}
}

// DefaultDataDir is /var/lib/kubeboot for root, else
// $XDG_DATA_HOME/kubeboot (~/.local/share/kubeboot).
func DefaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/kubeboot"
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "kubeboot")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "kubeboot")
	}
	return filepath.Join(os.TempDir(), "kubeboot")
}

// Complete resolves what follows from the settings (the data directory's
// absolute path, the files the server generates, the advertise address,
// the service account issuer and keys, the Service ranges, the
// components' settings) and checks every setting, returning every problem
// at once, each naming its flag. It writes nothing; the caller's groups
// are not modified.
func (c Config) Complete() (CompletedConfig, error) {
	cc := &completedConfig{Config: c}
	if err := cc.requireGroups(); err != nil {
		return CompletedConfig{}, err
	}
	errs := cc.completeFiles()
	errs = append(errs, cc.completeServing()...)
	errs = append(errs, cc.completeAudit()...)
	errs = append(errs, cc.GenericServerRun.Validate()...)
	errs = append(errs, cc.completeEtcd()...)
	svc, svcErrs := cc.completeServices()
	errs = append(errs, svcErrs...)
	errs = append(errs, cc.completeNodes(svc.CIDRs)...)
	errs = append(errs, cc.completeAuthentication()...)
	errs = append(errs, cc.Authorization.Validate()...)
	errs = append(errs, cc.Admission.Validate()...)
	errs = append(errs, cc.Features.Validate()...)
	crds, fileErrs := cc.checkFiles()
	errs = append(errs, fileErrs...)
	errs = append(errs, cc.completeComponents()...)
	egress, err := cc.egress()
	if err != nil {
		errs = append(errs, err)
	}
	advertise, err := cc.completeAdvertise(svc)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return CompletedConfig{}, errors.Join(errs...)
	}
	cc.apiserver = cc.apiserverConfig(svc, advertise, crds, egress)
	return CompletedConfig{cc}, nil
}

// completeFiles resolves the data directory and the files in its pki the
// server generates or reads by default, and checks
// --kubelet-certificate-authority.
func (cc *completedConfig) completeFiles() []error {
	var errs []error
	if cc.DataDir == "" {
		errs = append(errs, errors.New("--data-dir must not be empty"))
	} else if abs, err := filepath.Abs(cc.DataDir); err == nil {
		cc.DataDir = abs
	}
	pkiDir := PKIDirIn(cc.DataDir)
	if cc.ServiceAccountSigningKeyFile == "" {
		cc.ServiceAccountSigningKeyFile = filepath.Join(pkiDir, pki.ServiceAccountKeyName+".key")
	}
	if f := cc.KubeletCertificateAuthority; f == "" {
		cc.KubeletCertificateAuthority = filepath.Join(pkiDir, pki.CAName+".crt")
	} else if data, err := os.ReadFile(f); err != nil {
		errs = append(errs, fmt.Errorf("--kubelet-certificate-authority: %w", err))
	} else if _, err := pki.ParseCertificates(f, data); err != nil {
		errs = append(errs, fmt.Errorf("--kubelet-certificate-authority: %w", err))
	}
	return errs
}

// completeServing checks the secure serving group, in a copy, and
// resolves the generated serving certificate's files (in the data dir's
// pki, or --cert-dir) unless --tls-cert-file names one.
func (cc *completedConfig) completeServing() []error {
	var errs []error
	serving := *cc.SecureServing
	cc.SecureServing = &serving
	if p := serving.BindPort; p < 0 || p > 65535 {
		errs = append(errs, fmt.Errorf("--secure-port %d must be between 0 (a free port) and 65535", p))
	}
	if serving.BindAddress == nil {
		errs = append(errs, errors.New("--bind-address must be set"))
	}
	if serving.ServerCert.CertKey.CertFile == "" && serving.ServerCert.CertKey.KeyFile == "" {
		cc.servingCert = true
		dir := serving.ServerCert.CertDirectory
		if dir == "" {
			dir = PKIDirIn(cc.DataDir)
		}
		serving.ServerCert.CertKey = genericoptions.CertKey{
			CertFile: filepath.Join(dir, servingPairName+".crt"), KeyFile: filepath.Join(dir, servingPairName+".key")}
	} else {
		errs = append(errs, checkKeyPair("--tls-cert-file", "--tls-private-key-file", serving.ServerCert.CertKey)...)
	}
	return append(errs, checkTLS(&serving)...)
}

// completeServices parses the Service ranges and the endpoint
// reconciler, and checks the intervals of the server's loops.
func (cc *completedConfig) completeServices() (services.Config, []error) {
	var errs []error
	serviceCIDRs, err := network.ParseServiceCIDRs(cc.ServiceClusterIPRange)
	if err != nil {
		errs = append(errs, err)
	}
	nodePorts, err := network.ParsePortRange(cc.ServiceNodePortRange)
	if err != nil {
		errs = append(errs, err)
	}
	if cc.endpointReconciler, err = reconcilers.ParseType(cc.EndpointReconcilerType); err != nil {
		errs = append(errs, err)
	}
	if cc.APIServerCount <= 0 {
		errs = append(errs, fmt.Errorf("--apiserver-count %d must be a positive number", cc.APIServerCount))
	}
	if cc.EndpointLeaseTTL < time.Second || cc.EndpointReconcileInterval <= 0 {
		errs = append(errs, fmt.Errorf("--endpoint-lease-ttl %s must be at least 1s and --endpoint-reconciler-interval %s positive", cc.EndpointLeaseTTL, cc.EndpointReconcileInterval))
	}
	if cc.RepairInterval <= 0 || cc.RepairDeadline <= 0 {
		errs = append(errs, fmt.Errorf("--service-ip-repair-interval %s and --service-ip-repair-deadline %s must be positive", cc.RepairInterval, cc.RepairDeadline))
	}
	if p := cc.KubernetesServiceNodePort; p != 0 && (p < 0 || !nodePorts.Contains(p)) && nodePorts.Size > 0 {
		errs = append(errs, fmt.Errorf("--kubernetes-service-node-port %d must be in --service-node-port-range %s", p, nodePorts))
	}
	if cc.EventTTL <= 0 {
		errs = append(errs, fmt.Errorf("--event-ttl %s must be positive", cc.EventTTL))
	}
	if cc.CertificateCheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("the certificate check interval %s must be positive", cc.CertificateCheckInterval))
	}
	return services.Config{CIDRs: serviceCIDRs, NodePorts: nodePorts, RepairInterval: cc.RepairInterval, RepairDeadline: cc.RepairDeadline}, errs
}

// completeNodes checks the settings the nodes run with and resolves the
// cluster DNS's addresses in the Service ranges.
func (cc *completedConfig) completeNodes(ranges network.ServiceCIDRs) []error {
	var errs []error
	if err := cc.Nodes.Validate(); err != nil {
		errs = append(errs, err)
	}
	if ranges.Primary.IsValid() {
		var err error
		if cc.Nodes.ClusterDNS, err = network.ClusterDNS(cc.Nodes.ClusterDNS, ranges); err != nil {
			errs = append(errs, fmt.Errorf("--cluster-dns: %w", err))
		}
	}
	return errs
}

// completeComponents completes each component with the settings it may
// take its defaults from, noting what it needs of the server.
func (cc *completedConfig) completeComponents() []error {
	var errs []error
	settings := cc.componentSettings()
	for _, c := range cc.Components {
		needs, err := c.Complete(settings)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cc.components = append(cc.components, completedComponent{c, needs})
	}
	return errs
}

// completeAdvertise resolves the advertise address, then the server's
// place in an etcd cluster and its snapshots, which name it.
func (cc *completedConfig) completeAdvertise(svc services.Config) (netip.Addr, error) {
	advertise, err := cc.resolveAdvertiseAddress()
	if err != nil {
		return advertise, err
	}
	if cc.cluster, err = cc.completeCluster(advertise); err != nil {
		return advertise, err
	}
	if err := cc.completeSnapshots(); err != nil {
		return advertise, err
	}
	if primary := svc.CIDRs.Primary; cc.endpointReconciler != reconcilers.None && primary.IsValid() && primary.Addr().Is4() != advertise.Is4() {
		// kube-apiserver's message: the kubernetes Service's endpoints
		// would be of the wrong family.
		return advertise, fmt.Errorf("service IP family %q must match public address family %q", primary, advertise)
	}
	return advertise, nil
}

// apiserverConfig is the API server's configuration, from the completed
// settings.
func (cc *completedConfig) apiserverConfig(svc services.Config, advertise netip.Addr, crds []crdinstall.CRD, egress utilnet.DialFunc) apiserver.Config {
	return apiserver.Config{
		GenericServerRun:             cc.GenericServerRun,
		SecureServing:                cc.SecureServing,
		Etcd:                         cc.Etcd,
		Audit:                        cc.Audit,
		Authentication:               cc.Authentication,
		ServiceAccountSigningKeyFile: cc.ServiceAccountSigningKeyFile,
		Authorization:                cc.Authorization,
		Admission:                    cc.Admission,
		Features:                     cc.Features,
		AdvertiseAddress:             advertise,
		Services:                     svc,
		KubernetesServiceNodePort:    cc.KubernetesServiceNodePort,
		EndpointReconcilerType:       cc.endpointReconciler,
		APIServerCount:               cc.APIServerCount,
		EndpointLeaseTTL:             cc.EndpointLeaseTTL,
		EndpointReconcileInterval:    cc.EndpointReconcileInterval,
		EventTTL:                     cc.EventTTL,
		KubeletCertificateAuthority:  cc.KubeletCertificateAuthority,
		CRDs:                         crds,
		Progress:                     cc.Progress,
		InProcessUsers:               cc.inProcessUsers(),
		GarbageCollection:            cc.anyComponent(func(n Needs) bool { return n.GarbageCollector }),
		NamespaceController:          !cc.anyComponent(func(n Needs) bool { return n.NamespaceController }),
		Egress:                       egress,
	}
}

// requireGroups refuses a Config whose option groups were not set (by
// NewConfig).
func (c *Config) requireGroups() error {
	for _, g := range []struct {
		name string
		set  bool
	}{
		{"GenericServerRun", c.GenericServerRun != nil}, {"SecureServing", c.SecureServing != nil}, {"Etcd", c.Etcd != nil}, {"Audit", c.Audit != nil},
		{"Authentication", c.Authentication != nil}, {"Authorization", c.Authorization != nil},
		{"Admission", c.Admission != nil}, {"Features", c.Features != nil},
	} {
		if !g.set {
			return fmt.Errorf("controlplane: Config.%s is not set: start from NewConfig", g.name)
		}
	}
	return nil
}

// completeEtcd resolves --secrets-encryption into a copy of the etcd
// group, and checks it: embedded etcd unless --etcd-servers names a
// cluster, whose TLS files must exist.
func (cc *completedConfig) completeEtcd() []error {
	var errs []error
	etcd := *cc.Etcd
	cc.Etcd = &etcd
	if !cc.SecretsEncryption && cc.SecretsEncryptionProvider != secretsencryption.AESCBC {
		errs = append(errs, fmt.Errorf("--secrets-encryption-provider %s needs --secrets-encryption", cc.SecretsEncryptionProvider))
	}
	if cc.SecretsEncryption {
		if etcd.EncryptionProviderConfigFilepath != "" {
			errs = append(errs, errors.New("--secrets-encryption and --encryption-provider-config exclude each other: one keeps its configuration in --data-dir, the other is yours"))
		}
		if !slices.Contains(secretsencryption.Providers, cc.SecretsEncryptionProvider) {
			errs = append(errs, fmt.Errorf("--secrets-encryption-provider %q is none of %s", cc.SecretsEncryptionProvider, strings.Join(secretsencryption.Providers, ", ")))
		}
		etcd.EncryptionProviderConfigFilepath = secretsencryption.ConfigPath(cc.DataDir)
		etcd.EncryptionProviderConfigAutomaticReload = true
		cc.secretsEncryptionConfig = true
	}
	t := cc.Etcd.StorageConfig.Transport
	if len(t.ServerList) == 0 && (t.TrustedCAFile != "" || t.CertFile != "" || t.KeyFile != "") {
		errs = append(errs, errors.New("--etcd-cafile, --etcd-certfile and --etcd-keyfile need --etcd-servers"))
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		errs = append(errs, errors.New("--etcd-certfile and --etcd-keyfile must be set together"))
	}
	for _, f := range []struct{ flag, path string }{
		{"--etcd-cafile", t.TrustedCAFile}, {"--etcd-certfile", t.CertFile}, {"--etcd-keyfile", t.KeyFile},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.flag, err))
		}
	}
	if cc.Etcd.StorageConfig.Prefix == "" {
		errs = append(errs, errors.New("--etcd-prefix must not be empty"))
	}
	if cc.Etcd.StorageConfig.CompactionInterval < 0 {
		errs = append(errs, fmt.Errorf("--etcd-compaction-interval %s must not be negative", cc.Etcd.StorageConfig.CompactionInterval))
	}
	if _, err := os.Stat(cc.Etcd.EncryptionProviderConfigFilepath); cc.secretsEncryptionConfig && errors.Is(err, os.ErrNotExist) {
		// Written by New, on first start.
	} else if f := cc.Etcd.EncryptionProviderConfigFilepath; f != "" {
		// Loaded once to check it, as the server will load it: a
		// malformed file or an unknown provider is refused before
		// anything is written.
		ctx, cancel := context.WithCancel(context.Background())
		_, err := encryptionconfig.LoadEncryptionConfig(ctx, f, cc.Etcd.EncryptionProviderConfigAutomaticReload, "kubeboot")
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("--encryption-provider-config: %w", err))
		}
	} else if cc.Etcd.EncryptionProviderConfigAutomaticReload {
		errs = append(errs, errors.New("--encryption-provider-config-automatic-reload needs --encryption-provider-config"))
	}
	return errs
}

// completeAuthentication resolves the service account issuer (from the
// cluster domain) and verification keys (the signing key) in a copy of
// the authentication group, and checks it.
func (cc *completedConfig) completeAuthentication() []error {
	authn := *cc.Authentication
	cc.Authentication = &authn
	if authn.ServiceAccounts != nil {
		sa := *authn.ServiceAccounts
		authn.ServiceAccounts = &sa
		if len(sa.Issuers) == 0 {
			sa.Issuers = []string{"https://kubernetes.default.svc." + cc.Nodes.ClusterDomain}
		}
		if len(sa.KeyFiles) == 0 {
			sa.KeyFiles = []string{cc.ServiceAccountSigningKeyFile}
		}
	}
	if authn.ClientCert != nil {
		clientCert := *authn.ClientCert
		authn.ClientCert = &clientCert
	}
	return authn.Validate()
}

// checkFiles reads, without writing, what the server will use from disk:
// the data directory (its certificates and etcd data must be usable, so a
// foreign or damaged directory is refused before anything is touched), the
// token file, the client CA bundle and the CRD manifests, which it
// returns (CRDDir's, then Config.CRDs).
func (cc *completedConfig) checkFiles() ([]crdinstall.CRD, []error) {
	var errs []error
	if fi, err := os.Stat(cc.DataDir); err == nil && !fi.IsDir() {
		return nil, append(errs, fmt.Errorf("--data-dir %s is not a directory", cc.DataDir))
	} else if err != nil && !os.IsNotExist(err) {
		return nil, append(errs, fmt.Errorf("--data-dir %s: %w", cc.DataDir, err))
	}
	if err := checkStorage(cc.DataDir); err != nil {
		return nil, append(errs, fmt.Errorf("--data-dir %s: %w", cc.DataDir, err))
	}
	if err := pki.Check(PKIDirIn(cc.DataDir)); err != nil {
		errs = append(errs, fmt.Errorf("--data-dir %s: %w", cc.DataDir, err))
	} else {
		errs = append(errs, cc.checkCAs()...)
	}
	if cc.embeddedEtcd() {
		if err := etcd.CheckDataDir(filepath.Join(cc.DataDir, "etcd")); err != nil {
			errs = append(errs, fmt.Errorf("--data-dir %s: %w", cc.DataDir, err))
		}
	}
	if f := cc.tokenAuthFile(); f != "" {
		if _, err := tokenfile.NewCSV(f); err != nil {
			errs = append(errs, fmt.Errorf("--token-auth-file %s: %w", f, err))
		}
	}
	var crds []crdinstall.CRD
	if cc.CRDDir != "" {
		var err error
		if info, statErr := os.Stat(cc.CRDDir); statErr == nil && !info.IsDir() {
			errs = append(errs, fmt.Errorf("--crd-dir %s: not a directory", cc.CRDDir))
		} else if crds, err = crdinstall.Load(cc.CRDDir); err != nil {
			errs = append(errs, fmt.Errorf("--crd-dir %s: %w", cc.CRDDir, err))
		}
		// The server's refusals name the flag too.
		for i := range crds {
			crds[i].Source = "--crd-dir: " + crds[i].Source
		}
	}
	crds = append(crds, cc.CRDs...)
	if f := cc.clientCAFile(); f != "" {
		data, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("--client-ca-file: %w", err))
		} else if _, err := pki.ParseCertificates(f, data); err != nil {
			errs = append(errs, fmt.Errorf("--client-ca-file: %w", err))
		}
	}
	return crds, errs
}

// embeddedEtcd reports whether etcd runs in the process (no
// --etcd-servers).
func (c *Config) embeddedEtcd() bool { return len(c.Etcd.StorageConfig.Transport.ServerList) == 0 }

// clientCAFile is --client-ca-file, if set.
func (c *Config) clientCAFile() string {
	if c.Authentication.ClientCert == nil {
		return ""
	}
	return c.Authentication.ClientCert.ClientCA
}

// tokenAuthFile is --token-auth-file, if set.
func (c *Config) tokenAuthFile() string {
	if c.Authentication.TokenFile == nil {
		return ""
	}
	return c.Authentication.TokenFile.TokenFile
}

// resolveAdvertiseAddress resolves --advertise-address in a copy of the
// generic server group: if unset, the bind address if it is a specific
// address, else the host's default-route interface's.
func (cc *completedConfig) resolveAdvertiseAddress() (netip.Addr, error) {
	run := *cc.GenericServerRun
	cc.GenericServerRun = &run
	ip := run.AdvertiseAddress
	if ip == nil {
		var err error
		ip, err = utilnet.ResolveBindAddress(cc.SecureServing.BindAddress)
		if err != nil || ip == nil || ip.IsUnspecified() {
			return netip.Addr{}, fmt.Errorf("unable to find a suitable network address: no default route (%v); set --advertise-address explicitly", err)
		}
	} else if ip.IsUnspecified() || ip.IsLoopback() {
		return netip.Addr{}, fmt.Errorf("--advertise-address %s must be a specific, non-loopback address", ip)
	}
	addr, ok := netip.AddrFromSlice(ip)
	if !ok || addr.IsUnspecified() {
		return netip.Addr{}, fmt.Errorf("--advertise-address %q must be a specific IP address", ip)
	}
	run.AdvertiseAddress = net.IP(addr.Unmap().AsSlice())
	return addr.Unmap(), nil
}
