package apiserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	genericfeatures "k8s.io/apiserver/pkg/features"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/healthz"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	basecompatibility "k8s.io/component-base/compatibility"
	aggregatorapiserver "k8s.io/kube-aggregator/pkg/apiserver"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/controlplane"
	controlplaneapiserver "k8s.io/kubernetes/pkg/controlplane/apiserver"
	"k8s.io/kubernetes/pkg/kubeapiserver"
	kubeoptions "k8s.io/kubernetes/pkg/kubeapiserver/options"

	admissionregistrationrest "k8s.io/kubernetes/pkg/registry/admissionregistration/rest"
	apiserverinternalrest "k8s.io/kubernetes/pkg/registry/apiserverinternal/rest"
	appsrest "k8s.io/kubernetes/pkg/registry/apps/rest"
	authenticationrest "k8s.io/kubernetes/pkg/registry/authentication/rest"
	authorizationrest "k8s.io/kubernetes/pkg/registry/authorization/rest"
	autoscalingrest "k8s.io/kubernetes/pkg/registry/autoscaling/rest"
	batchrest "k8s.io/kubernetes/pkg/registry/batch/rest"
	certificatesrest "k8s.io/kubernetes/pkg/registry/certificates/rest"
	coordinationrest "k8s.io/kubernetes/pkg/registry/coordination/rest"
	discoveryrest "k8s.io/kubernetes/pkg/registry/discovery/rest"
	eventsrest "k8s.io/kubernetes/pkg/registry/events/rest"
	flowcontrolrest "k8s.io/kubernetes/pkg/registry/flowcontrol/rest"
	lifecyclerest "k8s.io/kubernetes/pkg/registry/lifecycle/rest"
	networkingrest "k8s.io/kubernetes/pkg/registry/networking/rest"
	noderest "k8s.io/kubernetes/pkg/registry/node/rest"
	policyrest "k8s.io/kubernetes/pkg/registry/policy/rest"
	rbacrest "k8s.io/kubernetes/pkg/registry/rbac/rest"
	resourcerest "k8s.io/kubernetes/pkg/registry/resource/rest"
	schedulingrest "k8s.io/kubernetes/pkg/registry/scheduling/rest"
	storagerest "k8s.io/kubernetes/pkg/registry/storage/rest"
	svmrest "k8s.io/kubernetes/pkg/registry/storagemigration/rest"

	"github.com/kubeboot/kubeboot/internal/apiserver/controllers/bootstrapobjects"
	"github.com/kubeboot/kubeboot/internal/apiserver/crdinstall"
	"github.com/kubeboot/kubeboot/internal/apiserver/etcdstore"
	"github.com/kubeboot/kubeboot/internal/apiserver/loopback"
	"github.com/kubeboot/kubeboot/internal/apiserver/reconcilers"
	"github.com/kubeboot/kubeboot/internal/apiserver/services"
	"github.com/kubeboot/kubeboot/internal/platform/network"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
	"github.com/kubeboot/kubeboot/internal/platform/sharedobjects"

	// Gives upstream's version package kubeboot's version, which
	// /version serves (through the effective version below).
	_ "github.com/kubeboot/kubeboot/internal/platform/version"
)

// Config is everything the API server needs, as live values.
type Config struct {
	// Listener is the secure port, already bound. Required.
	Listener net.Listener
	// ServingCert and ServingKey are the PEM serving certificate and key.
	ServingCert, ServingKey []byte
	// ClientCA is the PEM bundle that signs accepted client certificates.
	ClientCA []byte
	// LoopbackCert and LoopbackKey are a PEM pair for the server's own
	// clients (SNI name apiserver-loopback-client), signed by LoopbackCA.
	LoopbackCert, LoopbackKey, LoopbackCA []byte
	// Authentication is kube-apiserver's authentication option group:
	// client certificates (signed by ClientCA, or by --client-ca-file's
	// CAs when ClientCA is empty), --token-auth-file, service account
	// tokens and the structured authentication configuration. Service
	// account issuers default to DefaultServiceAccountIssuer, key files to
	// ServiceAccountSigningKeyFile. Required (NewAuthenticationOptions); it
	// is read, not modified.
	Authentication *kubeoptions.BuiltInAuthenticationOptions
	// ServiceAccountSigningKeyFile is --service-account-signing-key-file:
	// the private key that signs service account tokens. Required.
	ServiceAccountSigningKeyFile string
	// Authorization is kube-apiserver's authorization option group
	// (--authorization-mode and its webhook settings). Required
	// (NewAuthorizationOptions: Node,RBAC).
	Authorization *kubeoptions.BuiltInAuthorizationOptions
	// Admission is kube-apiserver's admission option group
	// (--enable-admission-plugins, --disable-admission-plugins,
	// --admission-control-config-file). Required.
	Admission *kubeoptions.AdmissionOptions
	// Features is the generic server's feature option group
	// (--enable-priority-and-fairness, --profiling, ...). Required.
	Features *genericoptions.FeatureOptions
	// PublicAddress is the address other members of the cluster reach this
	// server on (--advertise-address).
	PublicAddress netip.Addr
	// Etcd returns the storage client, which the caller owns and closes.
	// New calls it once it needs storage, having built what needs none,
	// so that an embedded member can start meanwhile. Required.
	Etcd func() (*clientv3.Client, error)
	// EtcdPrefix is --etcd-prefix. Default: /registry.
	EtcdPrefix string
	// EtcdCompactionInterval is --etcd-compaction-interval: how often old
	// revisions are compacted away; 0 disables compaction.
	EtcdCompactionInterval time.Duration
	// EnableWatchCache is --watch-cache.
	EnableWatchCache bool
	// EventTTL is --event-ttl (DefaultEventTTL). Required.
	EventTTL time.Duration
	// ServerRun is the generic server's run option group
	// (--shutdown-delay-duration, --max-requests-inflight,
	// --request-timeout, ...), applied to every server of the chain; its
	// component registry gives the version served at /version. The
	// advertise address is PublicAddress, resolved. Required: from
	// NewServerRunOptions. It is read, not modified.
	ServerRun *genericoptions.ServerRunOptions
	// ServiceCIDRs are the Service ranges (--service-cluster-ip-range).
	ServiceCIDRs network.ServiceCIDRs
	// NodePorts is --service-node-port-range.
	NodePorts network.PortRange
	// ProxyClientCertFile and ProxyClientKeyFile are the client
	// certificate the aggregator presents to extension apiservers (signed
	// by RequestHeaderCA).
	ProxyClientCertFile, ProxyClientKeyFile string
	// RequestHeaderCA is the PEM CA extension apiservers must trust for
	// the aggregator's proxied requests (front-proxy CA).
	RequestHeaderCA []byte
	// KubeletClientCertFile and KubeletClientKeyFile are the client
	// certificate the server presents to kubelets (pods/log, exec,
	// nodes/proxy): kube-apiserver's --kubelet-client-certificate and
	// --kubelet-client-key. Default: none, as kube-apiserver.
	KubeletClientCertFile, KubeletClientKeyFile string
	// KubernetesServiceNodePort is --kubernetes-service-node-port.
	KubernetesServiceNodePort int
	// EndpointReconcilerType is --endpoint-reconciler-type. Default: lease.
	EndpointReconcilerType reconcilers.Type
	// APIServerCount is --apiserver-count, for the master-count reconciler.
	APIServerCount int
	// EndpointLeaseTTL and EndpointReconcileInterval tune the lease
	// reconciler. Defaults: reconcilers.DefaultLeaseTTL and
	// reconcilers.DefaultReconcileInterval.
	EndpointLeaseTTL, EndpointReconcileInterval time.Duration
	// RepairInterval is how often the ClusterIP and NodePort repair loops
	// run. Required (DefaultRepairInterval).
	RepairInterval time.Duration
	// RepairDeadline bounds the first repair passes; past it the server
	// exits. Required (DefaultRepairDeadline).
	RepairDeadline time.Duration
	// CRDs are installed at start (--crd-dir); the server is ready only
	// once they are established, and stops if one is refused.
	CRDs []crdinstall.CRD

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
	// server: deleted namespaces are emptied and removed. Switch it off
	// when kube-controller-manager's namespace controller runs.
	NamespaceController bool
	// SharedObjects, if set, is where the server's informers share the
	// copies of Pods and Nodes the process's components hold (the Node
	// authorizer caches them, as kube-controller-manager and
	// kube-scheduler do).
	SharedObjects *sharedobjects.Pool
}

// DefaultEventTTL is how long Events are kept (--event-ttl), as
// kube-apiserver's.
const DefaultEventTTL = time.Hour

// Server is an assembled server chain, not yet running.
type Server struct {
	// Generic is the front of the chain (the aggregator's generic server):
	// it serves, runs every hook and destroys the chain.
	Generic *genericapiserver.GenericAPIServer
	// core is the server of the built-in API (upstream's registries);
	// crds the apiextensions server behind it; aggregator the front.
	core       *genericapiserver.GenericAPIServer
	crds       *apiextensionsapiserver.CustomResourceDefinitions
	aggregator *aggregatorapiserver.APIAggregator
	// openAPIV3 is the OpenAPI v3 configuration the chain's servers share.
	openAPIV3 *common.OpenAPIV3Config

	Scheme   *runtime.Scheme
	Client   kubernetes.Interface
	Loopback *rest.Config
	storage  *etcdstore.Backend
	// etcd is Config.Etcd's client.
	etcd *clientv3.Client
	// broadcaster and recorder record the server's own controllers'
	// Events (as kube-apiserver), once the bootstrap controller starts.
	broadcaster  record.EventBroadcaster
	recorder     record.EventRecorder
	coreProvider *coreProvider
	// informers is the shared informer factory on the loopback client,
	// started by the generic server's post-start hook.
	informers informers.SharedInformerFactory
	// internalClient is the loopback configuration of the server's own
	// controllers.
	internalClient *rest.Config
	// loopback carries every loopback client's requests to the chain's
	// handler in-process; Run stops it when the server has stopped.
	loopback *loopback.Transport
	// inProcessTokens are the bearer tokens of Config.InProcessUsers.
	inProcessTokens map[string]string
	// failed carries an error a post-start hook cannot recover from; Run
	// stops the server and returns it (rather than the process exiting,
	// so an in-process server fails its caller only).
	failed chan error
}

// New assembles the server chain (apiextensions, core, aggregator). On
// error nothing is left running.
func New(cfg Config) (_ *Server, err error) {
	if cfg.Listener == nil || cfg.Etcd == nil {
		return nil, errors.New("apiserver: a listener and an etcd client are required")
	}
	// Whatever is built is destroyed again if a later step fails: each
	// server of the chain takes over its delegate's destroy functions, so
	// the last one built is the one to destroy.
	var destroy []func()
	defer func() {
		if err != nil {
			for i := len(destroy) - 1; i >= 0; i-- {
				destroy[i]()
			}
		}
	}()

	if err := disablePeerProxy(); err != nil {
		return nil, err
	}
	loopbackTransport := &loopback.Transport{}
	gc, err := baseConfig(cfg, legacyscheme.Codecs, loopbackTransport)
	if err != nil {
		return nil, err
	}
	// The server's own controllers read deprecated APIs on purpose (the
	// kubernetes Endpoints): keep the deprecation warnings out of the logs.
	internalClient := rest.CopyConfig(gc.LoopbackClientConfig)
	internalClient.WarningHandler = rest.NoWarnings{}
	client, err := kubernetes.NewForConfig(internalClient)
	if err != nil {
		return nil, fmt.Errorf("loopback client: %w", err)
	}
	// As kube-apiserver: the informers' objects lose their managed fields,
	// which nothing in the server reads and which would double the cache.
	informerFactory := informers.NewSharedInformerFactoryWithOptions(client, 10*time.Minute,
		informers.WithTransform(cfg.SharedObjects.Transform))

	resourceConfig := controlplane.DefaultAPIResourceConfigSource()
	gc.MergedResourceConfig = resourceConfig
	storageFactory, err := newStorageFactory(gc, cfg.EtcdPrefix)
	if err != nil {
		return nil, err
	}
	resolver, err := newEndpointResolver(informerFactory)
	if err != nil {
		return nil, err
	}
	authn := authenticationOptions(cfg.Authentication)
	sa, err := newServiceAccountTokens(authn.ServiceAccounts, cfg.ServiceAccountSigningKeyFile)
	if err != nil {
		return nil, err
	}
	// Authentication adds its security definitions to the OpenAPI
	// configuration, which the core server keeps.
	withOpenAPI(gc)
	if err := applyAuthentication(gc, authn, cfg.ClientCA, client, informerFactory); err != nil {
		return nil, err
	}
	inProcessTokens := addInProcessUsers(gc, cfg.InProcessUsers)
	if err := applyAuthorization(gc, cfg.Authorization, informerFactory); err != nil {
		return nil, err
	}
	proxyTransport := controlplaneapiserver.CreateProxyTransport()
	if err := applyAdmission(gc, cfg.Admission, client, informerFactory, resourceConfig, proxyTransport, resolver); err != nil {
		return nil, err
	}
	// With priority and fairness on, this sets the flow controller that
	// replaces max-in-flight; its config consumer keeps the FlowSchemas'
	// and PriorityLevelConfigurations' status.
	if err := cfg.Features.ApplyTo(gc, client, informerFactory); err != nil {
		return nil, fmt.Errorf("features: %w", err)
	}

	// Storage comes last: the configuration above needs none, and is built
	// while an embedded etcd member starts.
	etcdClient, err := cfg.Etcd()
	if err != nil {
		return nil, err
	}
	backend, err := etcdstore.New(etcdstore.Config{
		Client:                etcdClient,
		Prefix:                cfg.EtcdPrefix,
		Serializer:            legacyscheme.Codecs,
		Resources:             storageFactory,
		EnableWatchCache:      cfg.EnableWatchCache,
		GarbageCollection:     cfg.GarbageCollection,
		CompactionInterval:    cfg.EtcdCompactionInterval,
		CountMetricPollPeriod: time.Minute,
		ObjectCountTracker:    gc.StorageObjectCountTracker,
	})
	if err != nil {
		return nil, err
	}
	destroy = append(destroy, backend.Destroy)
	gc.RESTOptionsGetter = backend
	gc.AddHealthChecks(healthz.NamedCheck("etcd", func(*http.Request) error {
		return backend.Check(context.Background(), 2*time.Second)
	}))
	gc.AddReadyzChecks(healthz.NamedCheck("etcd-readiness", func(*http.Request) error {
		return backend.Check(context.Background(), 2*time.Second)
	}))
	// The chain is built from the back: each server is its predecessor's
	// delegate, and takes over its post-start and pre-shutdown hooks.
	crds, err := newExtensionsServer(*gc, backend, informerFactory, resolver, cfg.APIServerCount)
	if err != nil {
		return nil, err
	}
	// From here the chain destroys the backend (its compactor) with the
	// rest, also after a normal stop, when it was left running before.
	crds.GenericAPIServer.RegisterDestroyFunc(backend.Destroy)
	destroy = append(destroy[:0], crds.GenericAPIServer.Destroy)

	coreConfig := *gc
	// The core server keeps the hooks the option groups added to gc (the
	// admission initializer's); the other servers of the chain start empty.
	coreConfig.PostStartHooks = maps.Clone(gc.PostStartHooks)
	// Served lazily by installOpenAPI.
	coreConfig.SkipOpenAPIInstallation = true
	authInfo, err := clusterAuthenticationInfo(cfg)
	if err != nil {
		return nil, err
	}
	cpConfig := controlplaneapiserver.Config{
		Generic: &coreConfig,
		Extra: controlplaneapiserver.Extra{
			ClusterAuthenticationInfo: authInfo,
			APIResourceConfigSource:   resourceConfig,
			StorageFactory:            storageFactory,
			EventTTL:                  cfg.EventTTL,
			ProxyTransport:            proxyTransport,
			EndpointSliceGetter:       resolver.slices,
			SystemNamespaces:          systemNamespaces,
			VersionedInformers:        informerFactory,

			ServiceAccountIssuer:                sa.issuer,
			ServiceAccountMaxExpiration:         sa.maxExpiration,
			ExtendExpiration:                    sa.extendExpiration,
			ServiceAccountExtendedMaxExpiration: sa.maxExtendedExpiration,
			ServiceAccountIssuerURL:             sa.issuerURL,
			ServiceAccountPublicKeysGetter:      sa.publicKeys,
		},
	}
	completed := cpConfig.Complete()
	cp, err := completed.New(controlplaneapiserver.KubeAPIServer, crds.GenericAPIServer)
	if err != nil {
		return nil, fmt.Errorf("building the generic API server: %w", err)
	}
	generic := cp.GenericAPIServer
	destroy = append(destroy[:0], generic.Destroy)

	// The Events of the server's own controllers, as kube-apiserver's.
	broadcaster := record.NewBroadcaster(record.WithContext(context.Background()))
	generic.RegisterDestroyFunc(broadcaster.Shutdown)
	recorder := broadcaster.NewRecorder(legacyscheme.Scheme, corev1.EventSource{Component: "kube-apiserver"})
	allocators, err := services.NewAllocators(services.Config{CIDRs: cfg.ServiceCIDRs, NodePorts: cfg.NodePorts,
		RepairInterval: cfg.RepairInterval, RepairDeadline: cfg.RepairDeadline, Recorder: recorder}, backend, client, informerFactory)
	if err != nil {
		return nil, err
	}
	generic.RegisterDestroyFunc(allocators.Destroy)
	core := &coreProvider{
		generic:    completed.NewCoreGenericConfig(),
		loopback:   gc.LoopbackClientConfig,
		kubelet:    kubeletClientConfig(cfg.KubeletClientCertFile, cfg.KubeletClientKeyFile),
		transport:  proxyTransport,
		slices:     resolver.slices,
		authorizer: gc.Authorization.Authorizer,
		services:   allocators,
		components: newComponentStatuses(backend.Check),
	}
	providers, err := storageProviders(gc, core, client, informerFactory, cfg.EventTTL)
	if err != nil {
		return nil, err
	}
	if err := cp.InstallAPIs(providers...); err != nil {
		return nil, fmt.Errorf("installing the API: %w", err)
	}
	if err := installOpenAPI(generic, coreConfig.OpenAPIConfig, coreConfig.OpenAPIV3Config); err != nil {
		return nil, fmt.Errorf("serving OpenAPI: %w", err)
	}
	s := &Server{Scheme: legacyscheme.Scheme, Client: client, Loopback: gc.LoopbackClientConfig, inProcessTokens: inProcessTokens,
		storage: backend, etcd: etcdClient, informers: informerFactory, internalClient: internalClient,
		coreProvider: core, broadcaster: broadcaster, recorder: recorder,
		core: generic, crds: crds, openAPIV3: coreConfig.OpenAPIV3Config, failed: make(chan error, 1)}
	if err := s.addHooks(cfg); err != nil {
		return nil, err
	}

	agg, err := newAggregator(*gc, backend, informerFactory, resolver, cfg.ProxyClientCertFile, cfg.ProxyClientKeyFile, generic)
	if err != nil {
		return nil, err
	}
	s.aggregator = agg
	s.Generic = agg.GenericAPIServer
	destroy = append(destroy[:0], s.Generic.Destroy)
	s.loopback = loopbackTransport
	loopbackTransport.SetHandler(agg.GenericAPIServer.Handler)
	if err := s.addAggregatorHooks(cfg); err != nil {
		return nil, err
	}
	return s, nil
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
func newStorageFactory(gc *genericapiserver.Config, prefix string) (*serverstorage.DefaultStorageFactory, error) {
	etcdOptions := genericoptions.NewEtcdOptions(storagebackend.NewDefaultConfig(prefix, nil))
	etcdOptions.DefaultStorageMediaType = etcdstore.StorageMediaType
	c := kubeapiserver.NewStorageFactoryConfigEffectiveVersion(gc.EffectiveVersion)
	c.APIResourceConfig = gc.MergedResourceConfig
	c.DefaultResourceEncoding.SetEffectiveVersion(gc.EffectiveVersion)
	f, err := c.Complete(etcdOptions).New()
	if err != nil {
		return nil, fmt.Errorf("storage factory: %w", err)
	}
	return f, nil
}

// storageProviders are the built-in API groups, as kube-apiserver's list,
// with kubeboot's core group.
func storageProviders(gc *genericapiserver.Config, core *coreProvider, client kubernetes.Interface, factory informers.SharedInformerFactory, eventTTL time.Duration) ([]controlplaneapiserver.RESTStorageProvider, error) {
	authz := gc.Authorization.Authorizer
	bootstrapClient, err := bootstrapobjects.NewClient(gc.LoopbackClientConfig)
	if err != nil {
		return nil, fmt.Errorf("bootstrap policy client: %w", err)
	}
	return []controlplaneapiserver.RESTStorageProvider{
		core,
		apiserverinternalrest.StorageProvider{},
		authenticationrest.RESTStorageProvider{Authenticator: gc.Authentication.Authenticator, APIAudiences: gc.Authentication.APIAudiences},
		authorizationrest.RESTStorageProvider{Authorizer: authz, RuleResolver: gc.RuleResolver},
		autoscalingrest.RESTStorageProvider{},
		batchrest.RESTStorageProvider{},
		certificatesrest.RESTStorageProvider{Authorizer: authz},
		coordinationrest.RESTStorageProvider{},
		discoveryrest.StorageProvider{},
		lifecyclerest.RESTStorageProvider{},
		networkingrest.RESTStorageProvider{},
		noderest.RESTStorageProvider{},
		policyrest.RESTStorageProvider{},
		withBootstrapHook{rbacrest.RESTStorageProvider{Authorizer: authz}, rbacrest.PostStartHookName,
			bootstrapobjects.NewRBAC(bootstrapClient, factory.Rbac().V1()).Ensure},
		withBootstrapHook{schedulingrest.RESTStorageProvider{}, schedulingrest.PostStartHookName, func(ctx context.Context) error {
			return bootstrapobjects.EnsurePriorityClasses(ctx, bootstrapClient)
		}},
		storagerest.RESTStorageProvider{},
		svmrest.RESTStorageProvider{},
		withBootstrapHook{flowcontrolrest.RESTStorageProvider{InformerFactory: factory}, flowcontrolrest.PostStartHookName,
			bootstrapobjects.NewFlowControl(bootstrapClient.FlowcontrolV1(), factory.Flowcontrol().V1()).Ensure},
		appsrest.StorageProvider{},
		admissionregistrationrest.RESTStorageProvider{Authorizer: authz, DiscoveryClient: client.Discovery()},
		eventsrest.RESTStorageProvider{TTL: eventTTL},
		resourcerest.RESTStorageProvider{NamespaceClient: client.CoreV1().Namespaces(), Authorizer: authz},
	}, nil
}

// withBootstrapHook is an upstream storage provider (RBAC, scheduling,
// flow control) whose post-start hook, under upstream's name, is
// kubeboot's: it stores the same bootstrap objects sooner
// (internal/apiserver/controllers/bootstrapobjects).
type withBootstrapHook struct {
	controlplaneapiserver.RESTStorageProvider
	name   string
	ensure func(context.Context) error
}

func (p withBootstrapHook) PostStartHook() (string, genericapiserver.PostStartHookFunc, error) {
	return p.name, stopIsNotFailure(func(hc genericapiserver.PostStartHookContext) error {
		return p.ensure(hc)
	}), nil
}

// baseConfig is what every server of the chain shares: serving, version,
// authentication, authorization and the handler chain.
func baseConfig(cfg Config, codecs serializer.CodecFactory, lb *loopback.Transport) (*genericapiserver.Config, error) {
	gc := genericapiserver.NewConfig(codecs)
	if err := cfg.ServerRun.ApplyTo(gc); err != nil {
		return nil, fmt.Errorf("server run options: %w", err)
	}
	if err := applyServing(gc, cfg, lb); err != nil {
		return nil, err
	}
	// One aggregated discovery document for the whole chain: each server
	// adds its groups, the aggregator serves it.
	gc.AggregatedDiscoveryGroupManager = aggregated.NewResourceManager("apis")
	gc.PublicAddress = net.IP(cfg.PublicAddress.AsSlice())
	return gc, nil
}

// applyServing sets up TLS serving, the loopback client (in-process, on
// lb) and the loopback SNI certificate.
func applyServing(gc *genericapiserver.Config, cfg Config, lb *loopback.Transport) error {
	cert, err := dynamiccertificates.NewStaticCertKeyContent("serving-cert", cfg.ServingCert, cfg.ServingKey)
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	ca, err := dynamiccertificates.NewStaticCAContent("client-ca", cfg.ClientCA)
	if err != nil {
		return fmt.Errorf("client CA: %w", err)
	}
	loopback, err := dynamiccertificates.NewStaticSNICertKeyContent("loopback-serving-cert", cfg.LoopbackCert, cfg.LoopbackKey, genericapiserver.LoopbackClientServerNameOverride)
	if err != nil {
		return fmt.Errorf("loopback certificate: %w", err)
	}
	gc.SecureServing = &genericapiserver.SecureServingInfo{
		Listener:      cfg.Listener,
		Cert:          cert,
		SNICerts:      []dynamiccertificates.SNICertKeyContentProvider{loopback},
		ClientCA:      ca,
		MinTLSVersion: tls.VersionTLS12,
	}
	gc.LoopbackClientConfig, err = gc.SecureServing.NewLoopbackClientConfig(uuid.NewString(), cfg.LoopbackCA)
	if err != nil {
		return fmt.Errorf("loopback client: %w", err)
	}
	// The server's own clients call its handler chain in-process (see
	// package loopback); the token still authenticates them. The SNI
	// certificate stays, as kube-apiserver serves it.
	gc.LoopbackClientConfig.TLSClientConfig = rest.TLSClientConfig{}
	gc.LoopbackClientConfig.Transport = lb
	certs, err := pki.ParseCertificates("loopback certificate", cfg.LoopbackCert)
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

// Run serves until ctx is done, then shuts down gracefully: pre-shutdown
// hooks, drain, stop. It returns once the server has stopped.
func (s *Server) Run(ctx context.Context) error {
	defer s.loopback.SetHandler(nil)
	// The chain's informers list through the in-process loopback, so they
	// can start before the server listens: they fill their caches while
	// PrepareRun builds the OpenAPI documents, and the post-start hooks
	// find them synced at their first look instead of their next poll
	// (client-go's WaitForCacheSync polls every 100 ms). They start once
	// the watch caches are loaded (a watch on a loading cache is told to
	// come back in a second); the hooks' own Start calls then find them
	// running. They stop when shutdown begins, before the server ends
	// their watches.
	go func() {
		if s.storage.WaitForCaches(ctx) != nil {
			return
		}
		s.informers.Start(ctx.Done())
		s.crds.Informers.Start(ctx.Done())
		s.aggregator.APIRegistrationInformers.Start(ctx.Done())
	}()

	prepared, err := s.aggregator.PrepareRun()
	if err != nil {
		return err
	}
	// The servers have built what they build from the generated OpenAPI
	// definitions of DefaultOpenAPIV3Config (the type information of
	// server-side apply, the eagerly built v3 documents of the apiextensions
	// server and the aggregator), and kube-openapi builds them anew where
	// a config has none: held for the process's life they are ~9 MB of an
	// idle heap of ~45. buildV3 builds its own.
	s.openAPIV3.Definitions = nil
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- prepared.Run(ctx) }()
	select {
	case err := <-done:
		return err
	case err := <-s.failed:
		cancel()
		<-done
		return err
	}
}

// DefaultShutdownWatchTerminationGracePeriod bounds how long open watches
// may delay a graceful stop (kube-apiserver's default, 0, lets a client's
// open watch hold a stopping server for up to the request timeout, 60s).
const DefaultShutdownWatchTerminationGracePeriod = 5 * time.Second

// NewServerRunOptions is kube-apiserver's generic run option group with
// the build's version, as kube-apiserver's (kubeboot's, which
// internal/platform/version gives upstream's version package), in a component
// registry of its own, so servers in one process share no version state,
// and kubeboot's watch drain period.
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
