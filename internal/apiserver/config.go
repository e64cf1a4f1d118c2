package apiserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	basecompatibility "k8s.io/component-base/compatibility"
	aggregatorapiserver "k8s.io/kube-aggregator/pkg/apiserver"

	"github.com/kubeboot/kubeboot/internal/allocator"
	"github.com/kubeboot/kubeboot/internal/allocator/clusterip"
	"github.com/kubeboot/kubeboot/internal/api"
	"github.com/kubeboot/kubeboot/internal/crdinstall"
	"github.com/kubeboot/kubeboot/internal/loopback"
	"github.com/kubeboot/kubeboot/internal/network"
	"github.com/kubeboot/kubeboot/internal/pki"
	"github.com/kubeboot/kubeboot/internal/reconcilers"
	"github.com/kubeboot/kubeboot/internal/registry/event"
	"github.com/kubeboot/kubeboot/internal/registry/ipaddress"
	"github.com/kubeboot/kubeboot/internal/storage"
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
	// TokenAuthFile is kube-apiserver's --token-auth-file (optional).
	TokenAuthFile string
	// PublicAddress is the address other members of the cluster reach this
	// server on (--advertise-address).
	PublicAddress netip.Addr
	// Etcd is the storage client; the caller owns and closes it.
	Etcd *clientv3.Client
	// EtcdPrefix is --etcd-prefix. Default: /registry.
	EtcdPrefix string
	// EtcdCompactionInterval is --etcd-compaction-interval: how often old
	// revisions are compacted away; 0 disables compaction.
	EtcdCompactionInterval time.Duration
	// EnableWatchCache is --watch-cache.
	EnableWatchCache bool
	// EventTTL is --event-ttl. Default: 1h.
	EventTTL time.Duration
	// ShutdownDelay is --shutdown-delay-duration.
	ShutdownDelay time.Duration
	// ShutdownWatchTerminationGracePeriod is
	// --shutdown-watch-termination-grace-period: at shutdown, open watches
	// are told to end and given this long to drain.
	ShutdownWatchTerminationGracePeriod time.Duration
	// Version is served at /version.
	Version apimachineryversion.Info
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
	// SystemNamespacesInterval is how often missing system namespaces are
	// recreated. Default: 1m.
	SystemNamespacesInterval time.Duration
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
	// IdentityLeaseGCPeriod is how often expired identity leases are
	// collected. Default: 1h.
	IdentityLeaseGCPeriod time.Duration
	// RepairInterval is how often the ClusterIP and NodePort repair loops
	// run. Default: 3m.
	RepairInterval time.Duration
	// RepairDeadline bounds the first repair passes; past it the server
	// exits. Default: 1m.
	RepairDeadline time.Duration
	// CRDs are installed at start (--crd-dir); the server is ready only
	// once they are established, and stops if one is refused.
	CRDs []crdinstall.CRD
}

// Server is an assembled server chain, not yet running.
type Server struct {
	// Generic is the front of the chain (the aggregator's generic server):
	// it serves, runs every hook and destroys the chain.
	Generic *genericapiserver.GenericAPIServer
	// core is the server of kubeboot's own resources; crds the
	// apiextensions server behind it; aggregator the front.
	core       *genericapiserver.GenericAPIServer
	crds       *apiextensionsapiserver.CustomResourceDefinitions
	aggregator *aggregatorapiserver.APIAggregator

	Scheme   *runtime.Scheme
	Codecs   serializer.CodecFactory
	Client   kubernetes.Interface
	Loopback *rest.Config
	storage  *storage.Backend
	// alloc, services and ipAddresses are what the repair loops read and
	// fix.
	alloc       *allocators
	services    allocator.Lister
	ipAddresses clusterip.ListerStore
	// informers is the shared informer factory on the loopback client,
	// started by the generic server's post-start hook.
	informers informers.SharedInformerFactory
	// internalClient is the loopback configuration of the server's own
	// controllers.
	internalClient *rest.Config
	// loopback carries every loopback client's requests to the chain's
	// handler in-process; Run stops it when the server has stopped.
	loopback *loopback.Transport
	// failed carries an error a post-start hook cannot recover from; Run
	// stops the server and returns it (rather than the process exiting,
	// so an in-process server fails its caller only).
	failed chan error
}

// New assembles the server chain (apiextensions, core, aggregator). On
// error nothing is left running.
func New(cfg Config) (*Server, error) {
	if cfg.Listener == nil || cfg.Etcd == nil {
		return nil, errors.New("apiserver: a listener and an etcd client are required")
	}
	if cfg.EventTTL == 0 {
		cfg.EventTTL = event.DefaultTTL
	}
	scheme := api.NewScheme()
	codecs := api.NewCodecs(scheme)

	loopbackTransport := &loopback.Transport{}
	gc, err := baseConfig(cfg, codecs, loopbackTransport)
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
	informerFactory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	if gc.AdmissionControl, err = newAdmission(client, informerFactory); err != nil {
		return nil, err
	}
	backend, err := storage.New(storage.Config{
		Client:                cfg.Etcd,
		Prefix:                cfg.EtcdPrefix,
		Serializer:            codecs,
		EnableWatchCache:      cfg.EnableWatchCache,
		CompactionInterval:    cfg.EtcdCompactionInterval,
		CountMetricPollPeriod: time.Minute,
		ObjectCountTracker:    gc.StorageObjectCountTracker,
	})
	if err != nil {
		return nil, err
	}
	gc.AddHealthChecks(healthz.NamedCheck("etcd", func(*http.Request) error {
		return backend.Check(context.Background(), 2*time.Second)
	}))
	gc.AddReadyzChecks(healthz.NamedCheck("etcd-readiness", func(*http.Request) error {
		return backend.Check(context.Background(), 2*time.Second)
	}))
	resolver, err := newEndpointResolver(informerFactory)
	if err != nil {
		backend.Destroy()
		return nil, err
	}

	// The chain is built from the back: each server is its predecessor's
	// delegate, and takes over its post-start and pre-shutdown hooks.
	crds, err := newExtensionsServer(*gc, backend, informerFactory, resolver, cfg.APIServerCount)
	if err != nil {
		backend.Destroy()
		return nil, err
	}

	coreConfig := *gc
	coreConfig.RESTOptionsGetter = backend
	coreConfig.PostStartHooks = map[string]genericapiserver.PostStartHookConfigEntry{}
	withOpenAPI(&coreConfig, scheme)
	// Served lazily by installOpenAPI.
	coreConfig.SkipOpenAPIInstallation = true
	generic, err := coreConfig.Complete(informerFactory).New("kube-apiserver", crds.GenericAPIServer)
	if err != nil {
		crds.GenericAPIServer.Destroy()
		backend.Destroy()
		return nil, fmt.Errorf("building the generic API server: %w", err)
	}
	generic.RegisterDestroyFunc(backend.Destroy)

	ipAddresses, err := ipaddress.NewREST(backend, scheme)
	if err != nil {
		generic.Destroy()
		return nil, err
	}
	alloc, err := newAllocators(backend, ipAddresses, informerFactory, cfg.ServiceCIDRs, cfg.NodePorts)
	if err != nil {
		ipAddresses.Destroy()
		generic.Destroy()
		return nil, err
	}
	generic.RegisterDestroyFunc(alloc.destroy)
	allocator.RegisterMetrics()
	groups, err := newStorages(backend, scheme, cfg.EventTTL, ipAddresses, alloc.service)
	if err != nil {
		ipAddresses.Destroy()
		generic.Destroy()
		return nil, err
	}
	if err := installAPIs(generic, scheme, codecs, groups); err != nil {
		destroyStorages(groups)
		generic.Destroy()
		return nil, err
	}
	if err := installOpenAPI(generic, coreConfig.OpenAPIConfig, coreConfig.OpenAPIV3Config); err != nil {
		generic.Destroy()
		return nil, fmt.Errorf("serving OpenAPI: %w", err)
	}
	s := &Server{Scheme: scheme, Codecs: codecs, Client: client, Loopback: gc.LoopbackClientConfig,
		storage: backend, informers: informerFactory, internalClient: internalClient,
		alloc: alloc, services: groups[""]["v1"]["services"].(allocator.Lister), ipAddresses: ipAddresses,
		core: generic, crds: crds, failed: make(chan error, 1)}
	if err := s.addHooks(cfg); err != nil {
		generic.Destroy()
		return nil, err
	}

	agg, err := newAggregator(*gc, backend, informerFactory, resolver, cfg.ProxyClientCertFile, cfg.ProxyClientKeyFile,
		[]*runtime.Scheme{scheme}, generic)
	if err != nil {
		generic.Destroy()
		return nil, err
	}
	s.aggregator = agg
	s.Generic = agg.GenericAPIServer
	s.loopback = loopbackTransport
	loopbackTransport.SetHandler(agg.GenericAPIServer.Handler)
	if err := s.addAggregatorHooks(cfg); err != nil {
		s.Generic.Destroy()
		return nil, err
	}
	return s, nil
}

// baseConfig is what every server of the chain shares: serving, version,
// authentication, authorization and the handler chain.
func baseConfig(cfg Config, codecs serializer.CodecFactory, lb *loopback.Transport) (*genericapiserver.Config, error) {
	gc := genericapiserver.NewConfig(codecs)
	if err := applyServing(gc, cfg, lb); err != nil {
		return nil, err
	}
	gc.EffectiveVersion = newEffectiveVersion(cfg.Version)
	// One aggregated discovery document for the whole chain: each server
	// adds its groups, the aggregator serves it.
	gc.AggregatedDiscoveryGroupManager = aggregated.NewResourceManager("apis")
	gc.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		return genericapiserver.DefaultBuildHandlerChain(withPatchErrors(h, codecs), c)
	}
	gc.PublicAddress = net.IP(cfg.PublicAddress.AsSlice())
	gc.ShutdownDelayDuration = cfg.ShutdownDelay
	gc.ShutdownWatchTerminationGracePeriod = cfg.ShutdownWatchTerminationGracePeriod
	gc.Authorization.Authorizer = authorizerfactory.NewAlwaysAllowAuthorizer()
	authn, err := newAuthenticator(gc.SecureServing.ClientCA.(dynamiccertificates.CAContentProvider).VerifyOptions, cfg.TokenAuthFile)
	if err != nil {
		return nil, err
	}
	gc.Authentication.Authenticator = authn
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

// effectiveVersion serves kubeboot's version at /version while keeping the
// library's API-level logic (emulation and compatibility versions).
type effectiveVersion struct {
	basecompatibility.MutableEffectiveVersion
	info apimachineryversion.Info
}

func newEffectiveVersion(info apimachineryversion.Info) *effectiveVersion {
	v := basecompatibility.NewEffectiveVersionFromString(info.Major+"."+info.Minor, "", "")
	return &effectiveVersion{MutableEffectiveVersion: v, info: info}
}

// Info implements basecompatibility.EffectiveVersion.
func (v *effectiveVersion) Info() *apimachineryversion.Info {
	info := v.info
	if ev := v.EmulationVersion(); ev != nil {
		info.EmulationMajor = strconv.FormatUint(uint64(ev.Major()), 10)
		info.EmulationMinor = strconv.FormatUint(uint64(ev.Minor()), 10)
	}
	if mc := v.MinCompatibilityVersion(); mc != nil {
		info.MinCompatibilityMajor = strconv.FormatUint(uint64(mc.Major()), 10)
		info.MinCompatibilityMinor = strconv.FormatUint(uint64(mc.Minor()), 10)
	}
	return &info
}
