// Package options turns kube-apiserver style flags into a
// controlplane.Config: it registers every flag of `kubeboot apiserver`.
package options

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	kubeoptions "k8s.io/kubernetes/pkg/kubeapiserver/options"

	"github.com/kubeboot/kubeboot/controlplane"
)

// APIServer holds the flags of `kubeboot apiserver`, named and defaulted
// as kube-apiserver's. The flags write into ControlPlane itself, so each
// setting lives in one place, controlplane.Config, and the defaults the
// help shows are controlplane.NewConfig's, the ones Complete fills in.
type APIServer struct {
	ControlPlane controlplane.Config
	// WatchCache is --watch-cache, the negation of
	// ControlPlane.DisableWatchCache.
	WatchCache bool
}

// NewAPIServer returns the flag defaults.
func NewAPIServer() *APIServer {
	return &APIServer{
		ControlPlane: controlplane.NewConfig(),
		WatchCache:   true,
	}
}

// AddFlags registers the flags on fs.
func (o *APIServer) AddFlags(fs *pflag.FlagSet) {
	c := &o.ControlPlane
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "Directory for the embedded etcd data, the generated certificates and admin.kubeconfig.")
	fs.IPVar(&c.BindAddress, "bind-address", c.BindAddress, "The IP address on which to listen for the --secure-port port. 0.0.0.0 listens on all interfaces.")
	fs.IntVar(&c.SecurePort, "secure-port", c.SecurePort, "The port on which to serve HTTPS with authentication and authorization. 0 picks a free port.")
	// kube-apiserver's: --advertise-address, --shutdown-delay-duration,
	// --shutdown-watch-termination-grace-period, --max-requests-inflight,
	// --request-timeout, ...
	c.Server.AddUniversalFlags(fs)

	fs.StringSliceVar(&c.Etcd.Servers, "etcd-servers", c.Etcd.Servers, "List of etcd servers to connect with (scheme://ip:port), comma separated. If empty, etcd runs embedded in --data-dir.")
	fs.StringVar(&c.Etcd.CAFile, "etcd-cafile", c.Etcd.CAFile, "SSL Certificate Authority file used to secure etcd communication.")
	fs.StringVar(&c.Etcd.CertFile, "etcd-certfile", c.Etcd.CertFile, "SSL certification file used to secure etcd communication.")
	fs.StringVar(&c.Etcd.KeyFile, "etcd-keyfile", c.Etcd.KeyFile, "SSL key file used to secure etcd communication.")
	fs.StringVar(&c.Etcd.Prefix, "etcd-prefix", c.Etcd.Prefix, "The prefix to prepend to all resource paths in etcd.")
	fs.DurationVar(&c.Etcd.CompactionInterval, "etcd-compaction-interval", c.Etcd.CompactionInterval, "The interval of compaction requests. If 0, the compaction request from apiserver is disabled.")

	fs.StringVar(&c.ServiceClusterIPRange, "service-cluster-ip-range", c.ServiceClusterIPRange, "A CIDR notation IP range from which to assign service cluster IPs, or two of different families separated by a comma for dual-stack. Default 10.0.0.0/24.")
	fs.StringVar(&c.ServiceNodePortRange, "service-node-port-range", c.ServiceNodePortRange, "A port range to reserve for services with NodePort visibility. Example: '30000-32767'. Inclusive at both ends of the range.")

	fs.IntVar(&c.KubernetesServiceNodePort, "kubernetes-service-node-port", c.KubernetesServiceNodePort, "If non-zero, the Kubernetes master service (which apiserver creates/maintains) will be of type NodePort, using this as the value of the port. If zero, the Kubernetes master service will be of type ClusterIP.")
	fs.StringVar(&c.EndpointReconcilerType, "endpoint-reconciler-type", c.EndpointReconcilerType, "Use an endpoint reconciler (master-count, lease, none).")
	fs.IntVar(&c.APIServerCount, "apiserver-count", c.APIServerCount, "The number of apiservers running in the cluster, must be a positive number. (In use when --endpoint-reconciler-type=master-count is enabled.)")
	fs.DurationVar(&c.EndpointLeaseTTL, "endpoint-lease-ttl", c.EndpointLeaseTTL, "How long the endpoint lease of an apiserver that stopped renewing it lives: a crashed apiserver leaves the kubernetes endpoints within about this time. (lease reconciler)")
	fs.DurationVar(&c.EndpointReconcileInterval, "endpoint-reconciler-interval", c.EndpointReconcileInterval, "How often the kubernetes Service and its endpoints are reconciled.")

	fs.DurationVar(&c.RepairInterval, "service-ip-repair-interval", c.RepairInterval, "How often the Service ClusterIP and NodePort repair loops rebuild the allocations from the Services.")
	fs.DurationVar(&c.RepairDeadline, "service-ip-repair-deadline", c.RepairDeadline, "How long the first repair passes may take; /readyz fails until they succeed, and past this the server exits.")

	// kube-apiserver's: --client-ca-file (CAs accepted besides the
	// generated one), --token-auth-file, --service-account-issuer (default
	// https://kubernetes.default.svc.cluster.local), --service-account-key-file
	// (default the signing key), --service-account-lookup, ...
	c.Authentication.AddFlags(fs)
	fs.StringVar(&c.ServiceAccountSigningKeyFile, "service-account-signing-key-file", c.ServiceAccountSigningKeyFile, "Path to the file that contains the current private key of the service account token issuer. Default: pki/sa.key in --data-dir, generated on first start.")
	c.Authorization.AddFlags(fs)
	c.Admission.AddFlags(fs)
	c.Features.AddFlags(fs)

	fs.StringVar(&c.CRDDir, "crd-dir", c.CRDDir, "If set, a directory of CustomResourceDefinition manifests (.yaml, .yml, .json) to install at start; the server is ready only once they are established.")

	fs.DurationVar(&c.EventTTL, "event-ttl", c.EventTTL, "Amount of time to retain events.")
	fs.BoolVar(&o.WatchCache, "watch-cache", o.WatchCache, "Enable watch caching in the apiserver.")
}

// Validate checks values a flag's type does not; it returns every problem,
// each naming its flag.
func (o *APIServer) Validate() error {
	c := &o.ControlPlane
	var errs []error
	// --feature-gates and --emulated-version, parsed into the registry,
	// apply only now (kube-apiserver's first step after parsing); an
	// unknown gate or an emulated version out of range fails here.
	if err := c.Server.ComponentGlobalsRegistry.Set(); err != nil {
		errs = append(errs, fmt.Errorf("--feature-gates, --emulated-version: %w", err))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("--data-dir must not be empty"))
	}
	if c.SecurePort < 0 || c.SecurePort > 65535 {
		errs = append(errs, fmt.Errorf("--secure-port %d must be between 0 and 65535, inclusive", c.SecurePort))
	}
	if c.Etcd.CompactionInterval < 0 {
		errs = append(errs, fmt.Errorf("--etcd-compaction-interval %s must not be negative", c.Etcd.CompactionInterval))
	}
	if c.EventTTL <= 0 {
		errs = append(errs, fmt.Errorf("--event-ttl %s must be positive", c.EventTTL))
	}
	if c.RepairInterval <= 0 || c.RepairDeadline <= 0 {
		errs = append(errs, fmt.Errorf("--service-ip-repair-interval %s and --service-ip-repair-deadline %s must be positive", c.RepairInterval, c.RepairDeadline))
	}
	if len(c.Etcd.Servers) == 0 && (c.Etcd.CAFile != "" || c.Etcd.CertFile != "" || c.Etcd.KeyFile != "") {
		errs = append(errs, errors.New("--etcd-cafile, --etcd-certfile and --etcd-keyfile need --etcd-servers"))
	}
	if (c.Etcd.CertFile == "") != (c.Etcd.KeyFile == "") {
		errs = append(errs, errors.New("--etcd-certfile and --etcd-keyfile must be set together"))
	}
	if a := c.Server.AdvertiseAddress; a != nil && (a.IsUnspecified() || a.IsLoopback()) {
		errs = append(errs, fmt.Errorf("--advertise-address %s must be a specific, non-loopback address", a))
	}
	errs = append(errs, authenticationToValidate(c).Validate()...)
	errs = append(errs, c.Authorization.Validate()...)
	errs = append(errs, c.Admission.Validate()...)
	errs = append(errs, c.Features.Validate()...)
	return errors.Join(errs...)
}

// authenticationToValidate is the authentication group as the server will
// use it: without --service-account-key-file, tokens are verified with the
// signing key, which upstream's checks require to be named.
func authenticationToValidate(c *controlplane.Config) *kubeoptions.BuiltInAuthenticationOptions {
	sa := c.Authentication.ServiceAccounts
	if sa == nil || len(sa.KeyFiles) > 0 {
		return c.Authentication
	}
	a, saCopy := *c.Authentication, *sa
	saCopy.KeyFiles = []string{c.ServiceAccountSigningKeyFile}
	if c.ServiceAccountSigningKeyFile == "" {
		saCopy.KeyFiles = []string{controlplane.DefaultServiceAccountSigningKeyFile(c.DataDir)}
	}
	a.ServiceAccounts = &saCopy
	return &a
}

// Config returns the control plane configuration the flags describe.
func (o *APIServer) Config() controlplane.Config {
	c := o.ControlPlane
	c.UseFreePort = c.SecurePort == 0
	c.Etcd.DisableCompaction = c.Etcd.CompactionInterval == 0
	c.DisableWatchCache = !o.WatchCache
	return c
}
