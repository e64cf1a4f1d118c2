package controlplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	kubeoptions "k8s.io/kubernetes/pkg/kubeapiserver/options"

	"github.com/kubeboot/kubeboot/internal/apiserver"
	"github.com/kubeboot/kubeboot/internal/apiserver/crdinstall"
	"github.com/kubeboot/kubeboot/internal/apiserver/etcdstore"
	"github.com/kubeboot/kubeboot/internal/apiserver/reconcilers"
	"github.com/kubeboot/kubeboot/internal/apiserver/services"
	"github.com/kubeboot/kubeboot/internal/platform/etcd"
	"github.com/kubeboot/kubeboot/internal/platform/network"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// Defaults, as kube-apiserver's where it has one.
const (
	DefaultSecurePort    = 6443
	DefaultClusterDomain = "cluster.local"
	// DefaultEtcdCompactionInterval is kube-apiserver's.
	DefaultEtcdCompactionInterval = 5 * time.Minute
)

// Config describes a control plane. The zero value works: every field
// documents its default.
type Config struct {
	// DataDir holds the embedded etcd data, the generated certificates and
	// admin.kubeconfig. Default: DefaultDataDir().
	DataDir string

	// BindAddress is the address the secure port listens on
	// (--bind-address). Default: 0.0.0.0 (all interfaces).
	BindAddress net.IP
	// SecurePort is --secure-port. Default: 6443. Set UseFreePort to
	// listen on any free port instead.
	SecurePort int
	// UseFreePort makes the server listen on a free port chosen by the
	// kernel; the port is in Server.URL.
	UseFreePort bool
	// Server is the generic server's run option group: --advertise-address
	// (the address published in the kubernetes Service's endpoints; if
	// unset, BindAddress if it is a specific non-loopback address, else the
	// address of the host's default-route interface),
	// --shutdown-delay-duration (how long the server keeps serving, with
	// /readyz failing, after a stop signal),
	// --shutdown-watch-termination-grace-period (how long open watches,
	// told to end, may take to drain at shutdown; default 5s),
	// --max-requests-inflight, --request-timeout and the rest of
	// kube-apiserver's generic server flags. Default:
	// NewServerRunOptions().
	Server *genericoptions.ServerRunOptions

	// Etcd selects external etcd; by default etcd runs embedded in DataDir.
	Etcd EtcdConfig

	// ServiceClusterIPRange is --service-cluster-ip-range. Default:
	// 10.0.0.0/24 (with a warning, as kube-apiserver).
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

	// ClusterDomain is the DNS domain of Services, used in the serving
	// certificate. Default: cluster.local.
	ClusterDomain string

	// Authentication is kube-apiserver's authentication option group:
	// client certificates (--client-ca-file: CAs accepted besides the
	// generated one), --token-auth-file, service account tokens
	// (--service-account-issuer, default
	// https://kubernetes.default.svc.cluster.local; --service-account-key-file,
	// default the signing key; --service-account-lookup,
	// --service-account-max-token-expiration, ...), --api-audiences and
	// --authentication-config. Default: NewAuthenticationOptions().
	Authentication *kubeoptions.BuiltInAuthenticationOptions
	// ServiceAccountSigningKeyFile is --service-account-signing-key-file:
	// the private key that signs service account tokens. Default:
	// pki/sa.key in DataDir, generated on first start.
	ServiceAccountSigningKeyFile string
	// Authorization is kube-apiserver's authorization option group
	// (--authorization-mode and its webhook flags). Default:
	// --authorization-mode=Node,RBAC.
	Authorization *kubeoptions.BuiltInAuthorizationOptions
	// Admission is kube-apiserver's admission option group
	// (--enable-admission-plugins, --disable-admission-plugins,
	// --admission-control-config-file). Default: kube-apiserver's plugins
	// in its order.
	Admission *kubeoptions.AdmissionOptions
	// Features is the generic server's feature option group
	// (--enable-priority-and-fairness, --profiling,
	// --contention-profiling, --debug-socket-path). Default: API Priority
	// and Fairness and profiling on, as kube-apiserver.
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
	// DisableWatchCache serves lists and watches from etcd (--watch-cache=false).
	DisableWatchCache bool

	// Components run in the process beside the API server (Component):
	// kube-controller-manager, kube-scheduler, simulated nodes, this
	// host's node. Default: none.
	Components []Component
}

// CRD is a CustomResourceDefinition to install at start, with the source
// (file and document) its errors name.
type CRD = crdinstall.CRD

// EtcdConfig points at an external etcd cluster.
type EtcdConfig struct {
	// Servers are the client URLs (--etcd-servers). Empty: embedded etcd.
	Servers []string
	// CAFile, CertFile and KeyFile secure the connection (--etcd-cafile,
	// --etcd-certfile, --etcd-keyfile).
	CAFile, CertFile, KeyFile string
	// Prefix is --etcd-prefix. Default: /registry.
	Prefix string
	// CompactionInterval is --etcd-compaction-interval: how often old
	// revisions are compacted away. Default: 5m, as kube-apiserver;
	// set DisableCompaction to turn it off.
	CompactionInterval time.Duration
	// DisableCompaction turns compaction off (--etcd-compaction-interval=0).
	DisableCompaction bool
}

// CompletedConfig is a Config with defaults applied and every value
// checked; only Complete makes one, and only New takes one.
type CompletedConfig struct {
	*completedConfig
}

type completedConfig struct {
	Config
	// components are Config.Components, completed.
	components []completedComponent
	// componentKubeconfigs are written with the certificates, for the
	// components that serve a port of their own.
	componentKubeconfigs []componentKubeconfig
	reconciler           reconcilers.Type
	serviceCIDRs         network.ServiceCIDRs
	nodePorts            network.PortRange
	advertiseAddr        netip.Addr
	crds                 []crdinstall.CRD
	warnings             []string
}

// Warnings lists what Complete defaulted that a user should know about.
func (c CompletedConfig) Warnings() []string { return c.warnings }

// NewServerRunOptions returns the default of Config.Server: kube-apiserver's
// generic server flags with kubeboot's defaults.
func NewServerRunOptions() *genericoptions.ServerRunOptions { return apiserver.NewServerRunOptions() }

// NewConfig returns the configuration every zero field of a Config stands
// for: the one list of kubeboot's defaults, which the flags show and
// Complete fills in. ServiceClusterIPRange stays empty: Complete defaults
// it with kube-apiserver's deprecation warning.
func NewConfig() Config {
	return Config{
		DataDir:     DefaultDataDir(),
		BindAddress: net.IPv4zero,
		SecurePort:  DefaultSecurePort,
		Server:      NewServerRunOptions(),
		Etcd: EtcdConfig{
			Prefix:             etcdstore.DefaultPrefix,
			CompactionInterval: DefaultEtcdCompactionInterval,
		},
		ServiceNodePortRange: network.DefaultServiceNodePortRange,

		EndpointReconcilerType:    string(reconcilers.Lease),
		APIServerCount:            1,
		EndpointLeaseTTL:          reconcilers.DefaultLeaseTTL,
		EndpointReconcileInterval: reconcilers.DefaultReconcileInterval,
		RepairInterval:            services.DefaultRepairInterval,
		RepairDeadline:            services.DefaultRepairDeadline,
		ClusterDomain:             DefaultClusterDomain,

		Authentication: apiserver.NewAuthenticationOptions(),
		Authorization:  apiserver.NewAuthorizationOptions(),
		Admission:      kubeoptions.NewAdmissionOptions(),
		Features:       genericoptions.NewFeatureOptions(),

		EventTTL: apiserver.DefaultEventTTL,
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

// Complete applies defaults and checks the configuration, returning every
// problem at once. It writes nothing.
func (c Config) Complete() (CompletedConfig, error) {
	cc := &completedConfig{Config: c}
	var errs []error
	d := NewConfig()
	setDefault(&cc.DataDir, d.DataDir)
	if abs, err := filepath.Abs(cc.DataDir); err == nil {
		cc.DataDir = abs
	}
	setDefault(&cc.ServiceAccountSigningKeyFile, DefaultServiceAccountSigningKeyFile(cc.DataDir))
	if cc.BindAddress == nil {
		cc.BindAddress = d.BindAddress
	}
	if !cc.UseFreePort {
		setDefault(&cc.SecurePort, d.SecurePort)
	}
	if cc.SecurePort < 0 || cc.SecurePort > 65535 {
		errs = append(errs, fmt.Errorf("--secure-port %d must be between 1 and 65535, inclusive", cc.SecurePort))
	}
	setDefault(&cc.ClusterDomain, d.ClusterDomain)
	if cc.Server == nil {
		cc.Server = d.Server
	} else {
		// Complete resolves the advertise address into its own copy.
		server := *cc.Server
		cc.Server = &server
	}
	errs = append(errs, cc.Server.Validate()...)
	setDefault(&cc.Authentication, d.Authentication)
	setDefault(&cc.Authorization, d.Authorization)
	setDefault(&cc.Admission, d.Admission)
	setDefault(&cc.Features, d.Features)
	setDefault(&cc.EventTTL, d.EventTTL)
	setDefault(&cc.RepairInterval, d.RepairInterval)
	setDefault(&cc.RepairDeadline, d.RepairDeadline)
	if cc.Etcd.DisableCompaction {
		cc.Etcd.CompactionInterval = 0
	} else {
		setDefault(&cc.Etcd.CompactionInterval, d.Etcd.CompactionInterval)
	}
	setDefault(&cc.Etcd.Prefix, d.Etcd.Prefix)
	setDefault(&cc.ServiceNodePortRange, d.ServiceNodePortRange)
	setDefault(&cc.EndpointReconcilerType, d.EndpointReconcilerType)
	setDefault(&cc.APIServerCount, d.APIServerCount)
	setDefault(&cc.EndpointLeaseTTL, d.EndpointLeaseTTL)
	setDefault(&cc.EndpointReconcileInterval, d.EndpointReconcileInterval)
	if cc.ServiceClusterIPRange == "" {
		cc.ServiceClusterIPRange = network.DefaultServiceClusterIPRange
		cc.warnings = append(cc.warnings, fmt.Sprintf("No CIDR for service cluster IPs specified. Default value which was %s is deprecated and will be removed in future releases. Please specify it using --service-cluster-ip-range on kube-apiserver.", network.DefaultServiceClusterIPRange))
	}
	var err error
	if cc.serviceCIDRs, err = network.ParseServiceCIDRs(cc.ServiceClusterIPRange); err != nil {
		errs = append(errs, err)
	}
	if cc.nodePorts, err = network.ParsePortRange(cc.ServiceNodePortRange); err != nil {
		errs = append(errs, err)
	}
	for _, f := range []struct{ flag, path string }{
		{"--client-ca-file", cc.clientCAFile()},
		{"--etcd-cafile", cc.Etcd.CAFile}, {"--etcd-certfile", cc.Etcd.CertFile}, {"--etcd-keyfile", cc.Etcd.KeyFile},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.flag, err))
		}
	}
	if cc.reconciler, err = reconcilers.ParseType(cc.EndpointReconcilerType); err != nil {
		errs = append(errs, err)
	}
	if cc.APIServerCount < 0 {
		errs = append(errs, fmt.Errorf("--apiserver-count %d must be a positive number", cc.APIServerCount))
	}
	if cc.EndpointLeaseTTL < time.Second || cc.EndpointReconcileInterval <= 0 {
		errs = append(errs, fmt.Errorf("--endpoint-lease-ttl %s must be at least 1s and --endpoint-reconciler-interval %s positive", cc.EndpointLeaseTTL, cc.EndpointReconcileInterval))
	}
	if p := cc.KubernetesServiceNodePort; p != 0 && (p < 0 || !cc.nodePorts.Contains(p)) && cc.nodePorts.Size > 0 {
		errs = append(errs, fmt.Errorf("--kubernetes-service-node-port %d must be in --service-node-port-range %s", p, cc.nodePorts))
	}
	errs = append(errs, cc.checkFiles()...)
	settings := cc.componentSettings()
	for _, c := range cc.Components {
		needs, err := c.Complete(settings)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cc.components = append(cc.components, completedComponent{c, needs})
	}
	if err := cc.resolveAdvertiseAddress(); err != nil {
		errs = append(errs, err)
	} else if cc.reconciler != reconcilers.None && cc.serviceCIDRs.Primary.IsValid() &&
		cc.serviceCIDRs.Primary.Addr().Is4() != cc.advertiseAddr.Is4() {
		// kube-apiserver's message: the kubernetes Service's endpoints
		// would be of the wrong family.
		errs = append(errs, fmt.Errorf("service IP family %q must match public address family %q", cc.serviceCIDRs.Primary, cc.advertiseAddr))
	}
	if len(errs) > 0 {
		return CompletedConfig{}, errors.Join(errs...)
	}
	return CompletedConfig{cc}, nil
}

// checkFiles reads, without writing, what the server will use from disk:
// the data directory (its certificates and etcd data must be usable, so a
// foreign or damaged directory is refused before anything is touched), the
// token file, the client CA bundle and the CRD manifests.
func (cc *completedConfig) checkFiles() []error {
	var errs []error
	if fi, err := os.Stat(cc.DataDir); err == nil && !fi.IsDir() {
		return append(errs, fmt.Errorf("--data-dir %s is not a directory", cc.DataDir))
	} else if err != nil && !os.IsNotExist(err) {
		return append(errs, fmt.Errorf("--data-dir %s: %w", cc.DataDir, err))
	}
	if err := pki.Check(filepath.Join(cc.DataDir, pkiDirName)); err != nil {
		errs = append(errs, fmt.Errorf("--data-dir %s: %w", cc.DataDir, err))
	}
	if len(cc.Etcd.Servers) == 0 {
		if err := etcd.CheckDataDir(filepath.Join(cc.DataDir, "etcd")); err != nil {
			errs = append(errs, fmt.Errorf("--data-dir %s: %w", cc.DataDir, err))
		}
	}
	if f := cc.tokenAuthFile(); f != "" {
		if _, err := tokenfile.NewCSV(f); err != nil {
			errs = append(errs, fmt.Errorf("--token-auth-file %s: %w", f, err))
		}
	}
	if cc.CRDDir != "" {
		var err error
		if info, statErr := os.Stat(cc.CRDDir); statErr == nil && !info.IsDir() {
			errs = append(errs, fmt.Errorf("--crd-dir %s: not a directory", cc.CRDDir))
		} else if cc.crds, err = crdinstall.Load(cc.CRDDir); err != nil {
			errs = append(errs, fmt.Errorf("--crd-dir %s: %w", cc.CRDDir, err))
		}
		// The server's refusals name the flag too.
		for i := range cc.crds {
			cc.crds[i].Source = "--crd-dir: " + cc.crds[i].Source
		}
	}
	cc.crds = append(cc.crds, cc.CRDs...)
	if f := cc.clientCAFile(); f != "" {
		if data, err := os.ReadFile(f); err == nil {
			if _, err := pki.ParseCertificates(f, data); err != nil {
				errs = append(errs, fmt.Errorf("--client-ca-file: %w", err))
			}
		}
	}
	return errs
}

// clientCAFile is --client-ca-file, if set.
func (c *Config) clientCAFile() string {
	if c.Authentication == nil || c.Authentication.ClientCert == nil {
		return ""
	}
	return c.Authentication.ClientCert.ClientCA
}

// tokenAuthFile is --token-auth-file, if set.
func (c *Config) tokenAuthFile() string {
	if c.Authentication == nil || c.Authentication.TokenFile == nil {
		return ""
	}
	return c.Authentication.TokenFile.TokenFile
}

// setDefault sets *field to def if it is the zero value.
func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

func (cc *completedConfig) resolveAdvertiseAddress() error {
	ip := cc.Server.AdvertiseAddress
	if ip == nil {
		var err error
		ip, err = utilnet.ResolveBindAddress(cc.BindAddress)
		if err != nil || ip == nil || ip.IsUnspecified() {
			return fmt.Errorf("unable to find a suitable network address: no default route (%v); set --advertise-address explicitly", err)
		}
	}
	addr, ok := netip.AddrFromSlice(ip)
	if !ok || addr.IsUnspecified() {
		return fmt.Errorf("--advertise-address %q must be a specific IP address", ip)
	}
	cc.advertiseAddr = addr.Unmap()
	cc.Server.AdvertiseAddress = ip
	return nil
}
