package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	genericfeatures "k8s.io/apiserver/pkg/features"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/egressselector"
	"k8s.io/apiserver/pkg/server/healthz"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/controlplane"
	controlplaneapiserver "k8s.io/kubernetes/pkg/controlplane/apiserver"
	"k8s.io/kubernetes/pkg/kubeapiserver"
	kubeoptions "k8s.io/kubernetes/pkg/kubeapiserver/options"

	"github.com/kubeboot/kubeboot/internal/apiserver/crdinstall"
	"github.com/kubeboot/kubeboot/internal/apiserver/etcdstore"
	"github.com/kubeboot/kubeboot/internal/apiserver/loopback"
	"github.com/kubeboot/kubeboot/internal/apiserver/reconcilers"
	"github.com/kubeboot/kubeboot/internal/apiserver/services"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
	"github.com/kubeboot/kubeboot/internal/platform/progress"
	"github.com/kubeboot/kubeboot/internal/platform/sharedobjects"

	// Gives upstream's version package kubeboot's version, which
	// /version serves (through the effective version below).
	_ "github.com/kubeboot/kubeboot/internal/platform/version"
)

// Config is the API server's configuration: kube-apiserver's option
// groups and kubeboot's settings, every one resolved and checked
// (controlplane.Config.Complete builds it). The groups are read, never
// modified.
type Config struct {
	// GenericServerRun is kube-apiserver's generic server group, applied
	// to every server of the chain; its component registry gives the
	// version served at /version.
	GenericServerRun *genericoptions.ServerRunOptions
	// SecureServing is kube-apiserver's secure serving group: TLS
	// settings and the serving certificate's files, which are reloaded
	// when they change. Resources.Listener is the port it names.
	SecureServing *genericoptions.SecureServingOptions
	// Etcd is kube-apiserver's etcd group: key prefix, compaction, watch
	// cache, storage media type, encryption at rest
	// (--encryption-provider-config). Resources.Etcd is the client.
	Etcd *genericoptions.EtcdOptions
	// Audit is kube-apiserver's audit group: policy, log and webhook
	// backends.
	Audit *genericoptions.AuditOptions
	// Authentication is kube-apiserver's authentication group, service
	// account issuers and keys resolved.
	Authentication *kubeoptions.BuiltInAuthenticationOptions
	// ServiceAccountSigningKeyFile is --service-account-signing-key-file.
	ServiceAccountSigningKeyFile string
	// Authorization is kube-apiserver's authorization group.
	Authorization *kubeoptions.BuiltInAuthorizationOptions
	// Admission is kube-apiserver's admission group.
	Admission *kubeoptions.AdmissionOptions
	// Features is the generic server's feature group.
	Features *genericoptions.FeatureOptions
	// AdvertiseAddress is GenericServerRun's --advertise-address, resolved:
	// the address other members of the cluster reach this server on.
	AdvertiseAddress netip.Addr
	// Services says how Services get their ClusterIPs and NodePorts.
	Services services.Config
	// KubernetesServiceNodePort is --kubernetes-service-node-port.
	KubernetesServiceNodePort int
	// EndpointReconcilerType is --endpoint-reconciler-type.
	EndpointReconcilerType reconcilers.Type
	// APIServerCount is --apiserver-count, for the master-count reconciler.
	APIServerCount int
	// EndpointLeaseTTL and EndpointReconcileInterval tune the lease
	// reconciler (--endpoint-lease-ttl, --endpoint-reconciler-interval).
	EndpointLeaseTTL, EndpointReconcileInterval time.Duration
	// EventTTL is --event-ttl.
	EventTTL time.Duration
	// KubeletCertificateAuthority is --kubelet-certificate-authority: the
	// CA the kubelets' serving certificates are verified against.
	KubeletCertificateAuthority string
	// CRDs are installed at start (--crd-dir); the server is ready only
	// once they are established, and stops if one is refused.
	CRDs []crdinstall.CRD
	// Progress receives how far installing the CRDs has come; nil: nothing
	// does.
	Progress progress.Func
	// InProcessUsers are the users the process's own components act as
	// (kube-controller-manager, kube-scheduler): each is given a bearer
	// token only this process knows (a user in no group, whose rights are
	// its RBAC bindings), and ClientConfigFor returns a client
	// configuration that authenticates as it and reaches the server
	// in-process.
	InProcessUsers []string
	// GarbageCollection switches on the registries' garbage collection
	// (owner references, foreground and orphan deletion), as
	// kube-apiserver's --enable-garbage-collector: a garbage collector
	// must run, or such deletes never finish.
	GarbageCollection bool
	// NamespaceController runs kubeboot's namespace controller in the
	// server: deleted namespaces are emptied and removed. Off when
	// kube-controller-manager's namespace controller runs.
	NamespaceController bool
	// Egress, if set, dials the cluster's network for the server:
	// kube-apiserver's egress selector "cluster" (admission and
	// conversion webhooks, aggregated API servers, the proxy
	// subresources, kubelets). Nil: directly.
	Egress utilnet.DialFunc
}

// Resources are what the server is given to run on: the port, bound,
// the certificates generated for it, and its storage.
type Resources struct {
	// Listener is the secure port, already bound. Required.
	Listener net.Listener
	// ClientCAFiles are the PEM bundles of the CAs that sign accepted client
	// certificates (the cluster CA's, and --client-ca-file); each is reloaded
	// when its file changes.
	ClientCAFiles []string
	// LoopbackCert and LoopbackKey are a PEM pair for the server's own
	// clients (SNI name apiserver-loopback-client), signed by LoopbackCA.
	LoopbackCert, LoopbackKey, LoopbackCA []byte
	// ProxyClientCertFile and ProxyClientKeyFile are the client
	// certificate the aggregator presents to extension apiservers (signed
	// by RequestHeaderCA, the front-proxy CA, which they must trust).
	ProxyClientCertFile, ProxyClientKeyFile string
	RequestHeaderCA                         []byte
	// KubeletClientCertFile and KubeletClientKeyFile are the client
	// certificate the server presents to kubelets (pods/log, exec,
	// nodes/proxy): kube-apiserver's --kubelet-client-certificate and
	// --kubelet-client-key.
	KubeletClientCertFile, KubeletClientKeyFile string
	// Etcd returns the storage client, which the caller owns and closes.
	// New calls it once it needs storage, having built what needs none,
	// so that an embedded member can start meanwhile. Required.
	Etcd func() (*clientv3.Client, error)
	// SharedObjects, if set, is where the server's informers share the
	// copies of Pods and Nodes the process's components hold (the Node
	// authorizer caches them, as kube-controller-manager and
	// kube-scheduler do).
	SharedObjects *sharedobjects.Pool
	// WrapHandler, if set, wraps the handler chain, to serve some paths
	// before authentication: the endpoints other servers join the
	// cluster through, which check a token of their own.
	WrapHandler func(http.Handler) http.Handler
	// ReadyzChecks are readiness checks of what the caller runs beside
	// the server (the embedded etcd's alarms).
	ReadyzChecks []healthz.HealthChecker
}

// DefaultEventTTL is how long Events are kept (--event-ttl), as
// kube-apiserver's.
const DefaultEventTTL = time.Hour

// DefaultShutdownWatchTerminationGracePeriod bounds how long open watches
// may delay a graceful stop (kube-apiserver's default, 0, lets a client's
// open watch hold a stopping server for up to the request timeout, 60s).
const DefaultShutdownWatchTerminationGracePeriod = 5 * time.Second

// NewServerRunOptions is kube-apiserver's generic run option group with
// the build's version, as kube-apiserver's (kubeboot's, which
// internal/platform/version gives upstream's version package), in a
// component registry of its own, so servers in one process share no
// version state, and kubeboot's watch drain period.
func NewServerRunOptions() *genericoptions.ServerRunOptions {
	registry := basecompatibility.NewComponentGlobalsRegistry()
	// Neither call can fail: the registry is new and no flag sets an
	// emulated version on it.
	utilruntime.Must(registry.Register(basecompatibility.DefaultKubeComponent, compatibility.DefaultBuildEffectiveVersion(), utilfeature.DefaultMutableFeatureGate))
	utilruntime.Must(registry.Set())
	o := genericoptions.NewServerRunOptionsForComponent(basecompatibility.DefaultKubeComponent, registry)
	o.ShutdownWatchTerminationGracePeriod = DefaultShutdownWatchTerminationGracePeriod
	return o
}

// chainConfig is what the servers of the chain are built from: the
// generic configuration they share and what was built for it.
type chainConfig struct {
	cfg Config
	res Resources
	// generic is shared by the chain: serving, version, authentication,
	// authorization, admission and the handler chain. Its storage is set
	// by withStorage.
	generic *genericapiserver.Config
	// loopback carries the loopback clients' requests to the chain's
	// handler in-process, once the front of the chain is built.
	loopback *loopback.Transport
	// client and internalClient are the server's own (loopback) client
	// and its configuration, informers the shared informer factory on it.
	client         kubernetes.Interface
	internalClient *rest.Config
	informers      informers.SharedInformerFactory

	resources      *serverstorage.ResourceConfig
	storageFactory *serverstorage.DefaultStorageFactory
	resolver       *endpointResolver
	proxyTransport *http.Transport
	// serviceAccounts issue and verify service account tokens.
	serviceAccounts *serviceAccountTokens
	// inProcessTokens are the bearer tokens of Config.InProcessUsers.
	inProcessTokens map[string]string
	// clientCA is Resources.ClientCAFiles' CAs, reloaded from their files.
	clientCA dynamiccertificates.CAContentProvider
	// transformers encrypt and decrypt the resources
	// --encryption-provider-config lists (encrypted); nil without a
	// configuration.
	transformers value.ResourceTransformers
	encrypted    []schema.GroupResource
	// close releases what the configuration holds (the encryption
	// transformers, once withStorage has loaded them) when no server was
	// built to release it.
	close func()
}

// newChainConfig builds the configuration the chain shares that needs no
// storage: it is built while an embedded etcd member starts.
func newChainConfig(cfg Config, res Resources) (_ *chainConfig, err error) {
	if err := disablePeerProxy(); err != nil {
		return nil, err
	}
	c := &chainConfig{cfg: cfg, res: res, loopback: &loopback.Transport{}, close: func() {}}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	gc := genericapiserver.NewConfig(legacyscheme.Codecs)
	c.generic = gc
	if err := cfg.GenericServerRun.ApplyTo(gc); err != nil {
		return nil, fmt.Errorf("server run options: %w", err)
	}
	gc.PublicAddress = net.IP(cfg.AdvertiseAddress.AsSlice())
	if wrap := res.WrapHandler; wrap != nil {
		build := gc.BuildHandlerChainFunc
		gc.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler { return wrap(build(h, c)) }
	}
	gc.AddReadyzChecks(res.ReadyzChecks...)
	if err := c.applyServing(); err != nil {
		return nil, err
	}
	// One aggregated discovery document for the whole chain: each server
	// adds its groups, the aggregator serves it.
	gc.AggregatedDiscoveryGroupManager = aggregated.NewResourceManager("apis")

	// The server's own controllers read deprecated APIs on purpose (the
	// kubernetes Endpoints): keep the deprecation warnings out of the logs.
	c.internalClient = rest.CopyConfig(gc.LoopbackClientConfig)
	c.internalClient.WarningHandler = rest.NoWarnings{}
	if c.client, err = kubernetes.NewForConfig(c.internalClient); err != nil {
		return nil, fmt.Errorf("loopback client: %w", err)
	}
	// As kube-apiserver: the informers' objects lose their managed fields,
	// which nothing in the server reads and which would double the cache.
	c.informers = informers.NewSharedInformerFactoryWithOptions(c.client, 10*time.Minute,
		informers.WithTransform(res.SharedObjects.Transform))

	c.resources = controlplane.DefaultAPIResourceConfigSource()
	gc.MergedResourceConfig = c.resources
	if c.storageFactory, err = newStorageFactory(gc, cfg.Etcd); err != nil {
		return nil, err
	}
	if c.resolver, err = newEndpointResolver(c.informers); err != nil {
		return nil, err
	}
	if c.serviceAccounts, err = newServiceAccountTokens(cfg.Authentication.ServiceAccounts, cfg.ServiceAccountSigningKeyFile); err != nil {
		return nil, err
	}
	// Authentication adds its security definitions to the OpenAPI
	// configuration, which the core server keeps.
	withOpenAPI(gc)
	if c.clientCA, err = dynamicCAs("client-ca", res.ClientCAFiles); err != nil {
		return nil, err
	}
	if err := applyAuthentication(gc, cfg.Authentication, c.clientCA, c.client, c.informers); err != nil {
		return nil, err
	}
	c.inProcessTokens = addInProcessUsers(gc, cfg.InProcessUsers)
	if err := applyAuthorization(gc, cfg.Authorization, c.informers); err != nil {
		return nil, err
	}
	c.proxyTransport = controlplaneapiserver.CreateProxyTransport()
	if cfg.Egress != nil {
		// As kube-apiserver with an egress selector configuration: the
		// proxy subresources' transport dials through it too.
		gc.EgressSelector = egressselector.NewEgressSelectorWithMap(map[egressselector.EgressType]utilnet.DialFunc{egressselector.Cluster: cfg.Egress})
		c.proxyTransport.DialContext = cfg.Egress
	}
	if err := applyAdmission(gc, cfg.Admission, c.client, c.informers, c.resources, c.proxyTransport, c.resolver); err != nil {
		return nil, err
	}
	if err := cfg.Audit.ApplyTo(gc); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	// With priority and fairness on, this sets the flow controller that
	// replaces max-in-flight; its config consumer keeps the FlowSchemas'
	// and PriorityLevelConfigurations' status.
	if err := cfg.Features.ApplyTo(gc, c.client, c.informers); err != nil {
		return nil, fmt.Errorf("features: %w", err)
	}
	return c, nil
}

// withStorage waits for the storage client and builds the backend every
// server of the chain stores through, with the etcd health checks.
func (c *chainConfig) withStorage() (*etcdstore.Backend, *clientv3.Client, error) {
	client, err := c.res.Etcd()
	if err != nil {
		return nil, nil, err
	}
	// Loaded once storage answers: a server of a cluster takes the
	// cluster's configuration when its etcd has started
	// (Resources.Etcd), before anything is read with it.
	if c.close, err = c.applyEncryption(); err != nil {
		return nil, nil, err
	}
	e := c.cfg.Etcd
	if err := checkDecryptable(context.Background(), client, e.StorageConfig.Prefix, c.storageFactory, c.transformers, c.encrypted); err != nil {
		return nil, nil, err
	}
	backend, err := etcdstore.New(etcdstore.Config{
		Client:                  client,
		Prefix:                  e.StorageConfig.Prefix,
		Serializer:              legacyscheme.Codecs,
		Resources:               c.storageFactory,
		EnableWatchCache:        e.EnableWatchCache,
		GarbageCollection:       c.cfg.GarbageCollection,
		DeleteCollectionWorkers: e.DeleteCollectionWorkers,
		CompactionInterval:      e.StorageConfig.CompactionInterval,
		CountMetricPollPeriod:   e.StorageConfig.CountMetricPollPeriod,
		ObjectCountTracker:      c.generic.StorageObjectCountTracker,
		Transformers:            c.transformers,
	})
	if err != nil {
		return nil, nil, err
	}
	c.generic.RESTOptionsGetter = backend
	c.generic.AddHealthChecks(healthz.NamedCheck("etcd", func(*http.Request) error {
		return backend.Check(context.Background(), 2*time.Second)
	}))
	c.generic.AddReadyzChecks(healthz.NamedCheck("etcd-readiness", func(*http.Request) error {
		return backend.Check(context.Background(), 2*time.Second)
	}))
	return backend, client, nil
}

// disablePeerProxy switches off the mixed-version proxy
// (UnknownVersionInteroperabilityProxy, on by default since 1.36): its
// peer leases are written through a storage of their own that dials
// --etcd-servers, which embedded etcd has not got, and every kubeboot of
// a cluster serves the same version. The switch is process-wide.
func disablePeerProxy() error {
	if !utilfeature.DefaultFeatureGate.Enabled(genericfeatures.UnknownVersionInteroperabilityProxy) {
		return nil
	}
	return utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{string(genericfeatures.UnknownVersionInteroperabilityProxy): false})
}

// systemNamespaces are created at start and kept, as kube-apiserver's.
var systemNamespaces = []string{metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease, metav1.NamespaceDefault}

// newStorageFactory is kube-apiserver's storage factory: each resource's
// storage version, codec and key prefix, so that etcd data is
// interchangeable with kube-apiserver's. kubeboot does not use the etcd
// connections it describes: every resource shares the one client.
func newStorageFactory(gc *genericapiserver.Config, etcd *genericoptions.EtcdOptions) (*serverstorage.DefaultStorageFactory, error) {
	c := kubeapiserver.NewStorageFactoryConfigEffectiveVersion(gc.EffectiveVersion)
	c.APIResourceConfig = gc.MergedResourceConfig
	c.DefaultResourceEncoding.SetEffectiveVersion(gc.EffectiveVersion)
	f, err := c.Complete(etcd).New()
	if err != nil {
		return nil, fmt.Errorf("storage factory: %w", err)
	}
	return f, nil
}

// applyServing applies the secure serving group on the listener given,
// and sets up the loopback client (in-process, on c.loopback) and the
// loopback SNI certificate.
func (c *chainConfig) applyServing() error {
	gc := c.generic
	serving := *c.cfg.SecureServing
	serving.Listener = c.res.Listener
	if err := serving.ApplyTo(&gc.SecureServing); err != nil {
		return fmt.Errorf("serving: %w", err)
	}
	loopbackCert, err := dynamiccertificates.NewStaticSNICertKeyContent("loopback-serving-cert", c.res.LoopbackCert, c.res.LoopbackKey, genericapiserver.LoopbackClientServerNameOverride)
	if err != nil {
		return fmt.Errorf("loopback certificate: %w", err)
	}
	gc.SecureServing.SNICerts = append(gc.SecureServing.SNICerts, loopbackCert)
	gc.LoopbackClientConfig, err = gc.SecureServing.NewLoopbackClientConfig(uuid.NewString(), c.res.LoopbackCA)
	if err != nil {
		return fmt.Errorf("loopback client: %w", err)
	}
	// The server's own clients call its handler chain in-process (see
	// package loopback); the token still authenticates them. The SNI
	// certificate stays, as kube-apiserver serves it.
	gc.LoopbackClientConfig.TLSClientConfig = rest.TLSClientConfig{}
	gc.LoopbackClientConfig.Transport = c.loopback
	certs, err := pki.ParseCertificates("loopback certificate", c.res.LoopbackCert)
	if err != nil {
		return err
	}
	// As kube-apiserver: a server that outlives its loopback certificate
	// cannot reach itself, so liveness fails and a supervisor restarts it
	// (which issues a new one).
	expires := certs[0].NotAfter
	check := healthz.NamedCheck("loopback-serving-certificate", func(*http.Request) error {
		if time.Now().After(expires) {
			return errors.New("loopback serving certificate is expired")
		}
		return nil
	})
	gc.HealthzChecks = append(gc.HealthzChecks, check)
	gc.LivezChecks = append(gc.LivezChecks, check)
	return nil
}
