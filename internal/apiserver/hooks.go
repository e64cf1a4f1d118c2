package apiserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/discovery"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/kube-aggregator/pkg/controllers/autoregister"

	"github.com/kubeboot/kubeboot/internal/apiserver/controllers/apiservices"
	"github.com/kubeboot/kubeboot/internal/apiserver/controllers/defaultservicecidr"
	"github.com/kubeboot/kubeboot/internal/apiserver/controllers/kubernetesservice"
	"github.com/kubeboot/kubeboot/internal/apiserver/controllers/namespace"
	"github.com/kubeboot/kubeboot/internal/apiserver/crdinstall"
	"github.com/kubeboot/kubeboot/internal/apiserver/reconcilers"
	"github.com/kubeboot/kubeboot/internal/platform/progress"
)

// Post-start hook names, as kube-apiserver's; each is also a readiness
// check poststarthook/<name>. Upstream's generic control plane
// (k8s.io/kubernetes/pkg/controlplane/apiserver) adds the system
// namespaces, identity lease, cluster authentication info and legacy
// token tracking controllers; the API groups add theirs (RBAC bootstrap
// policy, priority classes, API Priority and Fairness configuration).
const (
	hookBootstrap = "bootstrap-controller"
	// Not kube-apiserver's: the namespace controller belongs to
	// kube-controller-manager; the apiserver runs kubeboot's when that
	// does not run (Config.NamespaceController).
	hookNamespaceController = "start-namespace-controller"
	hookRepair              = "start-service-ip-repair-controllers"
	hookServiceCIDR         = "start-kubernetes-service-cidr-controller"
	hookAutoregistration    = "kube-apiserver-autoregistration"
	// Not kube-apiserver's: --crd-dir.
	hookCRDInstaller = "install-crds-from-dir"
)

// hook is a named post-start hook.
type hook struct {
	name string
	fn   genericapiserver.PostStartHookFunc
}

// addHooks registers the bootstrap controllers as post-start hooks, and
// the bootstrap controller's stop as a pre-shutdown hook. A hook returns
// once its controller's first pass succeeded, so /readyz fails until then;
// a hook error ends the process.
func (s *Server) addHooks(cfg Config, listener net.Listener) error {
	reconciler, err := s.newReconciler(cfg)
	if err != nil {
		return err
	}
	_, portStr, _ := net.SplitHostPort(listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	bootstrap := kubernetesservice.New(kubernetesservice.Config{
		AdvertiseAddress: cfg.AdvertiseAddress,
		ServiceIP:        cfg.Services.CIDRs.KubernetesServiceIP(),
		SecurePort:       int32(port),
		NodePort:         int32(cfg.KubernetesServiceNodePort),
		Interval:         cfg.EndpointReconcileInterval,
		Ready:            s.ready,
	}, s.Client, reconciler, s.recorder)
	cidr := defaultservicecidr.New(s.Client, cfg.Services.CIDRs.All(), s.recorder, 0)
	hooks := []hook{
		// In kube-apiserver's order, which /readyz?verbose lists.
		{hookBootstrap, func(hc genericapiserver.PostStartHookContext) error {
			s.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.Client.CoreV1().Events("")})
			return bootstrap.Start(hc)
		}},
		{hookServiceCIDR, func(hc genericapiserver.PostStartHookContext) error { return cidr.Start(hc) }},
	}
	if cfg.NamespaceController {
		md, err := metadata.NewForConfig(s.internalClient)
		if err != nil {
			return fmt.Errorf("metadata client: %w", err)
		}
		nsInformer := s.informers.Core().V1().Namespaces()
		finalizer, err := namespace.New(s.Client, md, nsInformer)
		if err != nil {
			return err
		}
		hooks = append(hooks, hook{hookNamespaceController, func(hc genericapiserver.PostStartHookContext) error {
			return finalizer.Start(hc, nsInformer.Informer().HasSynced)
		}})
	}
	for _, h := range hooks {
		if err := s.core.AddPostStartHook(h.name, stopIsNotFailure(h.fn)); err != nil {
			return fmt.Errorf("adding post-start hook %s: %w", h.name, err)
		}
	}
	return s.core.AddPreShutdownHook(hookBootstrap, func() error {
		// A failure here must not turn a clean stop into an error exit:
		// the endpoint lease expires on its own.
		if err := bootstrap.Stop(context.Background()); err != nil {
			klog.Background().Error(err, "Stopping the bootstrap controller")
		}
		return nil
	})
}

// addAggregatorHooks registers what needs the front of the chain: the
// APIServices of every served group version (kube-apiserver's
// autoregistration), and readiness until they are all Available.
func (s *Server) addAggregatorHooks(cfg Config) error {
	client, err := aggregatorclient.NewForConfig(s.internalClient)
	if err != nil {
		return fmt.Errorf("apiregistration client: %w", err)
	}
	apiServiceInformer := s.aggregator.APIRegistrationInformers.Apiregistration().V1().APIServices()
	autoreg := autoregister.NewAutoRegisterController(apiServiceInformer, client.ApiregistrationV1())
	builtin := apiservices.RegisterServed(autoreg, s.core.ListedPaths())
	crds, err := apiservices.NewCRDs(s.crds.Informers.Apiextensions().V1().CustomResourceDefinitions(), autoreg)
	if err != nil {
		return err
	}
	if err := s.Generic.AddPostStartHook(hookAutoregistration, func(hc genericapiserver.PostStartHookContext) error {
		go autoreg.Run(5, hc.Done())
		go crds.Run(hc)
		return nil
	}); err != nil {
		return err
	}
	if len(cfg.CRDs) > 0 {
		if err := s.addCRDInstaller(cfg.CRDs, cfg.Progress); err != nil {
			return err
		}
	}
	lister := apiServiceInformer.Lister()
	// A boot-sequence check, as kube-apiserver's: on /readyz, and on /livez
	// once the grace period has passed.
	return s.Generic.AddBootSequenceHealthChecks(healthz.NamedCheck("autoregister-completion", func(*http.Request) error {
		for _, name := range builtin {
			svc, err := lister.Get(name)
			if err != nil {
				return fmt.Errorf("APIService %s: %w", name, err)
			}
			if !apiservices.Available(svc) {
				return fmt.Errorf("APIService %s is not available yet", name)
			}
		}
		return nil
	}))
}

// addCRDInstaller installs the CRDs (--crd-dir, Config.CRDs) once the chain serves. The
// hook returns when they are established and in discovery, so /readyz
// waits for them; a refused CRD stops the server through s.failed.
func (s *Server) addCRDInstaller(crds []crdinstall.CRD, report progress.Func) error {
	client, err := apiextensionsclient.NewForConfig(s.internalClient)
	if err != nil {
		return fmt.Errorf("apiextensions client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(s.internalClient)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	return s.Generic.AddPostStartHook(hookCRDInstaller, func(hc genericapiserver.PostStartHookContext) error {
		err := crdinstall.Install(hc, client.ApiextensionsV1(), disco, crds, report)
		if err == nil {
			klog.FromContext(hc).Info("Installed CustomResourceDefinitions", "count", len(crds))
			return nil
		}
		// Let the rest of the start-up finish first: the libraries' hooks
		// end the process when stopped half-way.
		othersReady := func(ctx context.Context) (bool, error) {
			return s.readyExcept(ctx, "poststarthook/"+hookCRDInstaller), nil
		}
		if wait.PollUntilContextCancel(hc, 50*time.Millisecond, true, othersReady) == nil {
			s.failed <- fmt.Errorf("installing CustomResourceDefinitions: %w", err)
		}
		// Never report ready with CRDs missing.
		<-hc.Done()
		return nil
	})
}

// stopIsNotFailure makes a hook that fails because the server is stopping
// return nil: the generic server ends the process on a hook error, and a
// stop during start-up is not one.
func stopIsNotFailure(fn genericapiserver.PostStartHookFunc) genericapiserver.PostStartHookFunc {
	return func(hc genericapiserver.PostStartHookContext) error {
		err := fn(hc)
		if err != nil && hc.Err() != nil {
			klog.FromContext(hc).V(2).Info("Post-start hook stopped with the server", "err", err)
			return nil
		}
		return err
	}
}

// newReconciler builds the --endpoint-reconciler-type reconciler.
func (s *Server) newReconciler(cfg Config) (reconcilers.EndpointReconciler, error) {
	switch cfg.EndpointReconcilerType {
	case reconcilers.None:
		return reconcilers.NewNone(), nil
	case reconcilers.MasterCount:
		return reconcilers.NewMasterCount(s.Client, cfg.APIServerCount), nil
	case reconcilers.Lease, "":
		opts, err := s.storage.GetRESTOptions(corev1.Resource("endpoints"), nil)
		if err != nil {
			return nil, err
		}
		return reconcilers.NewLease(s.Client, s.etcd, opts.StorageConfig.Prefix, cfg.EndpointLeaseTTL, opts.StorageConfig.Codec), nil
	}
	return nil, fmt.Errorf("unknown endpoint reconciler type %q", cfg.EndpointReconcilerType)
}

// Ready is closed once this server's /readyz first answers 200.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// watchReady closes s.ready once this server's /readyz answers 200,
// unless ctx is done first.
func (s *Server) watchReady(ctx context.Context) {
	if s.WaitReadyExcept(ctx) == nil {
		close(s.ready)
	}
}

// WaitReadyExcept waits until this server's /readyz, without the named
// checks, answers 200: for what a check waits on, which needs the server
// otherwise ready.
func (s *Server) WaitReadyExcept(ctx context.Context, exclude ...string) error {
	return wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		return s.readyExcept(ctx, exclude...), nil
	})
}

// readyExcept reports whether this server's /readyz, without the named
// checks, answers 200.
func (s *Server) readyExcept(ctx context.Context, exclude ...string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var code int
	req := s.Client.CoreV1().RESTClient().Get().AbsPath("/readyz")
	for _, e := range exclude {
		req = req.Param("exclude", e)
	}
	req.Do(ctx).StatusCode(&code)
	return code == 200
}
