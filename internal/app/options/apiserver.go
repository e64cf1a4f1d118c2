// Package options turns kube-apiserver style flags into a
// controlplane.Config. It is the only code that knows flag names.
package options

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	kubeoptions "k8s.io/kubernetes/pkg/kubeapiserver/options"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/apiserver"
	"github.com/kubeboot/kubeboot/internal/network"
	"github.com/kubeboot/kubeboot/internal/reconcilers"
	"github.com/kubeboot/kubeboot/internal/storage"
)

// APIServer holds the flags of `kubeboot apiserver`, named and defaulted
// as kube-apiserver's.
type APIServer struct {
	DataDir     string
	BindAddress net.IP
	SecurePort  int

	EtcdServers  []string
	EtcdCAFile   string
	EtcdCertFile string
	EtcdKeyFile  string
	EtcdPrefix   string

	EtcdCompactionInterval time.Duration

	ServiceClusterIPRange string
	ServiceNodePortRange  string

	KubernetesServiceNodePort int
	EndpointReconcilerType    string
	APIServerCount            int
	EndpointLeaseTTL          time.Duration
	EndpointReconcileInterval time.Duration
	RepairInterval            time.Duration
	RepairDeadline            time.Duration

	ServiceAccountSigningKeyFile string

	// Server, Authentication, Authorization, Admission and Features are
	// upstream's option groups: their flags, defaults, checks and messages
	// are upstream's.
	Server         *genericoptions.ServerRunOptions
	Authentication *kubeoptions.BuiltInAuthenticationOptions
	Authorization  *kubeoptions.BuiltInAuthorizationOptions
	Admission      *kubeoptions.AdmissionOptions
	Features       *genericoptions.FeatureOptions

	CRDDir string

	EventTTL   time.Duration
	WatchCache bool
}

// NewAPIServer returns the flag defaults.
func NewAPIServer() *APIServer {
	return &APIServer{
		DataDir:     controlplane.DefaultDataDir(),
		BindAddress: net.IPv4zero,
		SecurePort:  controlplane.DefaultSecurePort,
		EtcdPrefix:  storage.DefaultPrefix,

		EtcdCompactionInterval: controlplane.DefaultEtcdCompactionInterval,
		ServiceNodePortRange:   network.DefaultServiceNodePortRange,

		EndpointReconcilerType:    string(reconcilers.Lease),
		APIServerCount:            1,
		EndpointLeaseTTL:          reconcilers.DefaultLeaseTTL,
		EndpointReconcileInterval: reconcilers.DefaultReconcileInterval,
		RepairInterval:            apiserver.DefaultRepairInterval,
		RepairDeadline:            apiserver.DefaultRepairDeadline,

		EventTTL:   apiserver.DefaultEventTTL,
		WatchCache: true,

		Server:         controlplane.NewServerRunOptions(),
		Authentication: apiserver.NewAuthenticationOptions(),
		Authorization:  apiserver.NewAuthorizationOptions(),
		Admission:      kubeoptions.NewAdmissionOptions(),
		Features:       genericoptions.NewFeatureOptions(),
	}
}

// AddFlags registers the flags on fs.
func (o *APIServer) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "Directory for the embedded etcd data, the generated certificates and admin.kubeconfig.")
	fs.IPVar(&o.BindAddress, "bind-address", o.BindAddress, "The IP address on which to listen for the --secure-port port. 0.0.0.0 listens on all interfaces.")
	fs.IntVar(&o.SecurePort, "secure-port", o.SecurePort, "The port on which to serve HTTPS with authentication and authorization. 0 picks a free port.")
	// kube-apiserver's: --advertise-address, --shutdown-delay-duration,
	// --shutdown-watch-termination-grace-period, --max-requests-inflight,
	// --request-timeout, ...
	o.Server.AddUniversalFlags(fs)

	fs.StringSliceVar(&o.EtcdServers, "etcd-servers", o.EtcdServers, "List of etcd servers to connect with (scheme://ip:port), comma separated. If empty, etcd runs embedded in --data-dir.")
	fs.StringVar(&o.EtcdCAFile, "etcd-cafile", o.EtcdCAFile, "SSL Certificate Authority file used to secure etcd communication.")
	fs.StringVar(&o.EtcdCertFile, "etcd-certfile", o.EtcdCertFile, "SSL certification file used to secure etcd communication.")
	fs.StringVar(&o.EtcdKeyFile, "etcd-keyfile", o.EtcdKeyFile, "SSL key file used to secure etcd communication.")
	fs.StringVar(&o.EtcdPrefix, "etcd-prefix", o.EtcdPrefix, "The prefix to prepend to all resource paths in etcd.")
	fs.DurationVar(&o.EtcdCompactionInterval, "etcd-compaction-interval", o.EtcdCompactionInterval, "The interval of compaction requests. If 0, the compaction request from apiserver is disabled.")

	fs.StringVar(&o.ServiceClusterIPRange, "service-cluster-ip-range", o.ServiceClusterIPRange, "A CIDR notation IP range from which to assign service cluster IPs, or two of different families separated by a comma for dual-stack. Default 10.0.0.0/24.")
	fs.StringVar(&o.ServiceNodePortRange, "service-node-port-range", o.ServiceNodePortRange, "A port range to reserve for services with NodePort visibility. Example: '30000-32767'. Inclusive at both ends of the range.")

	fs.IntVar(&o.KubernetesServiceNodePort, "kubernetes-service-node-port", o.KubernetesServiceNodePort, "If non-zero, the Kubernetes master service (which apiserver creates/maintains) will be of type NodePort, using this as the value of the port. If zero, the Kubernetes master service will be of type ClusterIP.")
	fs.StringVar(&o.EndpointReconcilerType, "endpoint-reconciler-type", o.EndpointReconcilerType, "Use an endpoint reconciler (master-count, lease, none).")
	fs.IntVar(&o.APIServerCount, "apiserver-count", o.APIServerCount, "The number of apiservers running in the cluster, must be a positive number. (In use when --endpoint-reconciler-type=master-count is enabled.)")
	fs.DurationVar(&o.EndpointLeaseTTL, "endpoint-lease-ttl", o.EndpointLeaseTTL, "How long the endpoint lease of an apiserver that stopped renewing it lives: a crashed apiserver leaves the kubernetes endpoints within about this time. (lease reconciler)")
	fs.DurationVar(&o.EndpointReconcileInterval, "endpoint-reconciler-interval", o.EndpointReconcileInterval, "How often the kubernetes Service and its endpoints are reconciled.")

	fs.DurationVar(&o.RepairInterval, "service-ip-repair-interval", o.RepairInterval, "How often the Service ClusterIP and NodePort repair loops rebuild the allocations from the Services.")
	fs.DurationVar(&o.RepairDeadline, "service-ip-repair-deadline", o.RepairDeadline, "How long the first repair passes may take; /readyz fails until they succeed, and past this the server exits.")

	// kube-apiserver's: --client-ca-file (CAs accepted besides the
	// generated one), --token-auth-file, --service-account-issuer (default
	// https://kubernetes.default.svc.cluster.local), --service-account-key-file
	// (default the signing key), --service-account-lookup, ...
	o.Authentication.AddFlags(fs)
	fs.StringVar(&o.ServiceAccountSigningKeyFile, "service-account-signing-key-file", o.ServiceAccountSigningKeyFile, "Path to the file that contains the current private key of the service account token issuer. Default: pki/sa.key in --data-dir, generated on first start.")
	o.Authorization.AddFlags(fs)
	o.Admission.AddFlags(fs)
	o.Features.AddFlags(fs)

	fs.StringVar(&o.CRDDir, "crd-dir", o.CRDDir, "If set, a directory of CustomResourceDefinition manifests (.yaml, .yml, .json) to install at start; the server is ready only once they are established.")

	fs.DurationVar(&o.EventTTL, "event-ttl", o.EventTTL, "Amount of time to retain events.")
	fs.BoolVar(&o.WatchCache, "watch-cache", o.WatchCache, "Enable watch caching in the apiserver.")
}

// Validate checks values a flag's type does not; it returns every problem,
// each naming its flag.
func (o *APIServer) Validate() error {
	var errs []error
	if o.DataDir == "" {
		errs = append(errs, errors.New("--data-dir must not be empty"))
	}
	if o.SecurePort < 0 || o.SecurePort > 65535 {
		errs = append(errs, fmt.Errorf("--secure-port %d must be between 0 and 65535, inclusive", o.SecurePort))
	}
	if o.EtcdCompactionInterval < 0 {
		errs = append(errs, fmt.Errorf("--etcd-compaction-interval %s must not be negative", o.EtcdCompactionInterval))
	}
	if o.EventTTL <= 0 {
		errs = append(errs, fmt.Errorf("--event-ttl %s must be positive", o.EventTTL))
	}
	if o.RepairInterval <= 0 || o.RepairDeadline <= 0 {
		errs = append(errs, fmt.Errorf("--service-ip-repair-interval %s and --service-ip-repair-deadline %s must be positive", o.RepairInterval, o.RepairDeadline))
	}
	if len(o.EtcdServers) == 0 && (o.EtcdCAFile != "" || o.EtcdCertFile != "" || o.EtcdKeyFile != "") {
		errs = append(errs, errors.New("--etcd-cafile, --etcd-certfile and --etcd-keyfile need --etcd-servers"))
	}
	if (o.EtcdCertFile == "") != (o.EtcdKeyFile == "") {
		errs = append(errs, errors.New("--etcd-certfile and --etcd-keyfile must be set together"))
	}
	if a := o.Server.AdvertiseAddress; a != nil && (a.IsUnspecified() || a.IsLoopback()) {
		errs = append(errs, fmt.Errorf("--advertise-address %s must be a specific, non-loopback address", a))
	}
	errs = append(errs, o.authenticationToValidate().Validate()...)
	errs = append(errs, o.Authorization.Validate()...)
	errs = append(errs, o.Admission.Validate()...)
	errs = append(errs, o.Features.Validate()...)
	return errors.Join(errs...)
}

// authenticationToValidate is the authentication group as the server will
// use it: without --service-account-key-file, tokens are verified with the
// signing key, which upstream's checks require to be named.
func (o *APIServer) authenticationToValidate() *kubeoptions.BuiltInAuthenticationOptions {
	sa := o.Authentication.ServiceAccounts
	if sa == nil || len(sa.KeyFiles) > 0 {
		return o.Authentication
	}
	c, saCopy := *o.Authentication, *sa
	saCopy.KeyFiles = []string{o.ServiceAccountSigningKeyFile}
	if o.ServiceAccountSigningKeyFile == "" {
		saCopy.KeyFiles = []string{controlplane.DefaultServiceAccountSigningKeyFile(o.DataDir)}
	}
	c.ServiceAccounts = &saCopy
	return &c
}

// Config returns the control plane configuration the flags describe.
func (o *APIServer) Config() controlplane.Config {
	return controlplane.Config{
		DataDir:     o.DataDir,
		BindAddress: o.BindAddress,
		SecurePort:  o.SecurePort,
		UseFreePort: o.SecurePort == 0,
		Server:      o.Server,
		Etcd: controlplane.EtcdConfig{
			Servers:  o.EtcdServers,
			CAFile:   o.EtcdCAFile,
			CertFile: o.EtcdCertFile,
			KeyFile:  o.EtcdKeyFile,
			Prefix:   o.EtcdPrefix,

			CompactionInterval: o.EtcdCompactionInterval,
			DisableCompaction:  o.EtcdCompactionInterval == 0,
		},
		ServiceClusterIPRange: o.ServiceClusterIPRange,
		ServiceNodePortRange:  o.ServiceNodePortRange,

		KubernetesServiceNodePort: o.KubernetesServiceNodePort,
		EndpointReconcilerType:    o.EndpointReconcilerType,
		APIServerCount:            o.APIServerCount,
		EndpointLeaseTTL:          o.EndpointLeaseTTL,
		EndpointReconcileInterval: o.EndpointReconcileInterval,
		RepairInterval:            o.RepairInterval,
		RepairDeadline:            o.RepairDeadline,

		Authentication:               o.Authentication,
		ServiceAccountSigningKeyFile: o.ServiceAccountSigningKeyFile,
		Authorization:                o.Authorization,
		Admission:                    o.Admission,
		Features:                     o.Features,

		CRDDir:            o.CRDDir,
		EventTTL:          o.EventTTL,
		DisableWatchCache: !o.WatchCache,
	}
}
