package apiserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/server/flagz"
	cliflag "k8s.io/component-base/cli/flag"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	aggregatorapiserver "k8s.io/kube-aggregator/pkg/apiserver"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	controlplaneapiserver "k8s.io/kubernetes/pkg/controlplane/apiserver"
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
	"github.com/kubeboot/kubeboot/internal/apiserver/etcdstore"
	"github.com/kubeboot/kubeboot/internal/apiserver/loopback"
	"github.com/kubeboot/kubeboot/internal/apiserver/services"
)

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

	// Flags are the settings the server runs with as kube-apiserver's
	// flags (Flags), which /flagz serves.
	Flags cliflag.NamedFlagSets

	Scheme   *runtime.Scheme
	Client   kubernetes.Interface
	Loopback *rest.Config
	storage  *etcdstore.Backend
	// etcd is Resources.Etcd's client.
	etcd         *clientv3.Client
	coreProvider *coreProvider
	// broadcaster and recorder record the server's own controllers'
	// Events (as kube-apiserver), once the bootstrap controller starts.
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	// informers is the shared informer factory on the loopback client,
	// started by Run.
	informers informers.SharedInformerFactory
	// internalClient is the loopback configuration of the server's own
	// controllers.
	internalClient *rest.Config
	// loopback carries every loopback client's requests to the chain's
	// handler in-process; Run stops it when the server has stopped.
	loopback *loopback.Transport
	// inProcessTokens are the bearer tokens of Config.InProcessUsers.
	inProcessTokens map[string]string
	// ready is closed once /readyz is 200 (watchReady).
	ready chan struct{}
	// failed carries an error a post-start hook cannot recover from; Run
	// stops the server and returns it (rather than the process exiting,
	// so an in-process server fails its caller only).
	failed chan error
	// destroy destroys what New built so far, if it fails: the storage,
	// then the front of the chain, which has taken over the destroy
	// functions of the servers behind it.
	destroy func()
}

// New assembles the server chain, as kube-apiserver's CreateServerChain:
// the apiextensions server (CustomResourceDefinitions) is the delegate
// behind the core server, and the aggregator (APIServices) stands in
// front; a request falls through from one to the next until one serves
// it. The configuration that needs no storage is built first, while an
// embedded etcd member starts. On error nothing is left running.
func New(cfg Config, res Resources) (_ *Server, err error) {
	if res.Listener == nil || res.Etcd == nil {
		return nil, errors.New("apiserver: a listener and an etcd client are required")
	}
	s := &Server{Scheme: legacyscheme.Scheme, ready: make(chan struct{}), failed: make(chan error, 1), destroy: func() {}}
	defer func() {
		if err != nil {
			s.destroy()
		}
	}()
	c, err := newChainConfig(cfg, res)
	if err != nil {
		return nil, err
	}
	s.Flags = Flags(cfg, res)
	c.generic.Flagz = flagz.NamedFlagSetsReader{FlagSets: s.Flags}
	s.Client, s.Loopback, s.internalClient, s.informers, s.loopback = c.client, c.generic.LoopbackClientConfig, c.internalClient, c.informers, c.loopback
	s.inProcessTokens = c.inProcessTokens
	s.destroy = func() { c.close() }
	if s.storage, s.etcd, err = c.withStorage(); err != nil {
		return nil, err
	}
	s.destroy = func() {
		s.storage.Destroy()
		c.close()
	}
	if s.crds, err = newExtensionsServer(*c.generic, s.storage, c.informers, c.resolver, cfg.APIServerCount); err != nil {
		return nil, err
	}
	// From here the chain destroys the backend (its compactor) and the
	// encryption transformers with the rest, also after a normal stop.
	s.crds.GenericAPIServer.RegisterDestroyFunc(s.storage.Destroy)
	s.crds.GenericAPIServer.RegisterDestroyFunc(c.close)
	s.destroy = s.crds.GenericAPIServer.Destroy
	if err := s.newCoreServer(c); err != nil {
		return nil, err
	}
	if err := s.addHooks(cfg, res.Listener); err != nil {
		return nil, err
	}
	if s.aggregator, err = newAggregator(*c.generic, s.storage, c.informers, c.resolver, res.ProxyClientCertFile, res.ProxyClientKeyFile, s.core); err != nil {
		return nil, err
	}
	s.Generic = s.aggregator.GenericAPIServer
	s.destroy = s.Generic.Destroy
	c.loopback.SetHandler(s.Generic.Handler)
	if err := s.addAggregatorHooks(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// Recorder records Events as the server's own controllers do (source
// kube-apiserver).
func (s *Server) Recorder() record.EventRecorder { return s.recorder }

// createSystemNamespaces creates the system namespaces before the
// post-start hooks run. Upstream's system namespaces controller (a hook)
// creates them too, but the identity lease controller (another hook)
// writes its Lease to kube-system at once, and on a fresh start logged an
// error for the namespace it did not find yet. Best effort: a namespace
// not created here is the hook's to create.
func (s *Server) createSystemNamespaces(ctx context.Context) {
	var wg sync.WaitGroup
	for _, name := range systemNamespaces {
		wg.Go(func() {
			_, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				klog.FromContext(ctx).V(2).Info("Creating a system namespace before the post-start hooks", "namespace", name, "err", err)
			}
		})
	}
	wg.Wait()
}

// newCoreServer builds the core server on the apiextensions server: the
// built-in API on upstream's registries, kubeboot's core group (package
// services allocates the Services' ClusterIPs and NodePorts).
func (s *Server) newCoreServer(c *chainConfig) error {
	gc := *c.generic
	// The core server keeps the hooks the option groups added to the
	// generic configuration (the admission initializer's); the other
	// servers of the chain start empty.
	gc.PostStartHooks = maps.Clone(c.generic.PostStartHooks)
	// Served lazily by installOpenAPI.
	gc.SkipOpenAPIInstallation = true
	s.openAPIV3 = gc.OpenAPIV3Config
	authInfo, err := clusterAuthenticationInfo(c.res, c.clientCA)
	if err != nil {
		return err
	}
	sa := c.serviceAccounts
	completed := (&controlplaneapiserver.Config{
		Generic: &gc,
		Extra: controlplaneapiserver.Extra{
			ClusterAuthenticationInfo: authInfo,
			APIResourceConfigSource:   c.resources,
			StorageFactory:            c.storageFactory,
			EventTTL:                  c.cfg.EventTTL,
			ProxyTransport:            c.proxyTransport,
			EndpointSliceGetter:       c.resolver.slices,
			SystemNamespaces:          systemNamespaces,
			VersionedInformers:        c.informers,

			ServiceAccountIssuer:                sa.issuer,
			ServiceAccountMaxExpiration:         sa.maxExpiration,
			ExtendExpiration:                    sa.extendExpiration,
			ServiceAccountExtendedMaxExpiration: sa.maxExtendedExpiration,
			ServiceAccountIssuerURL:             sa.issuerURL,
			ServiceAccountPublicKeysGetter:      sa.publicKeys,
		},
	}).Complete()
	cp, err := completed.New(controlplaneapiserver.KubeAPIServer, s.crds.GenericAPIServer)
	if err != nil {
		return fmt.Errorf("building the generic API server: %w", err)
	}
	s.core = cp.GenericAPIServer
	s.destroy = s.core.Destroy

	// The Events of the server's own controllers, as kube-apiserver's.
	s.broadcaster = record.NewBroadcaster(record.WithContext(context.Background()))
	s.core.RegisterDestroyFunc(s.broadcaster.Shutdown)
	s.recorder = s.broadcaster.NewRecorder(legacyscheme.Scheme, corev1.EventSource{Component: "kube-apiserver"})
	servicesConfig := c.cfg.Services
	servicesConfig.Recorder = s.recorder
	allocators, err := services.NewAllocators(servicesConfig, s.storage, c.client, c.informers)
	if err != nil {
		return err
	}
	s.core.RegisterDestroyFunc(allocators.Destroy)
	s.coreProvider = &coreProvider{
		generic:    completed.NewCoreGenericConfig(),
		loopback:   c.generic.LoopbackClientConfig,
		kubelet:    kubeletClientConfig(c.res.KubeletClientCertFile, c.res.KubeletClientKeyFile, c.cfg.KubeletCertificateAuthority, c.generic.EgressSelector),
		transport:  c.proxyTransport,
		slices:     c.resolver.slices,
		authorizer: c.generic.Authorization.Authorizer,
		services:   allocators,
		components: newComponentStatuses(s.storage.Check),
		uncached:   s.storage.UncachedDecorator(),
	}
	providers, err := storageProviders(c.generic, s.coreProvider, c.client, c.informers, c.cfg.EventTTL)
	if err != nil {
		return err
	}
	if err := cp.InstallAPIs(providers...); err != nil {
		return fmt.Errorf("installing the API: %w", err)
	}
	if err := installOpenAPI(s.core, gc.OpenAPIConfig, gc.OpenAPIV3Config); err != nil {
		return fmt.Errorf("serving OpenAPI: %w", err)
	}
	return nil
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
		s.informers.StartWithContext(ctx)
		s.crds.Informers.StartWithContext(ctx)
		s.aggregator.APIRegistrationInformers.StartWithContext(ctx)
	}()

	namespaces := make(chan struct{})
	go func() {
		defer close(namespaces)
		s.createSystemNamespaces(ctx)
	}()
	prepared, err := s.aggregator.PrepareRun()
	if err != nil {
		return err
	}
	<-namespaces
	// The servers have built what they build from the generated OpenAPI
	// definitions of DefaultOpenAPIV3Config (the type information of
	// server-side apply, the eagerly built v3 documents of the apiextensions
	// server and the aggregator), and kube-openapi builds them anew where
	// a config has none: held for the process's life they are ~9 MB of an
	// idle heap of ~45. buildV3 builds its own.
	s.openAPIV3.Definitions = nil
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.watchReady(ctx)
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
