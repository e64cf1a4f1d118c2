package apiserver

import (
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/egressselector"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/apiserver/pkg/util/proxy"
	admissionregistrationv1client "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	policyclient "k8s.io/client-go/kubernetes/typed/policy/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/features"
	kubeletclient "k8s.io/kubernetes/pkg/kubelet/client"
	controllerstore "k8s.io/kubernetes/pkg/registry/core/replicationcontroller/storage"
	corerest "k8s.io/kubernetes/pkg/registry/core/rest"

	"github.com/kubeboot/kubeboot/internal/apiserver/services"

	"k8s.io/kubernetes/pkg/registry/core/componentstatus"
	endpointsstore "k8s.io/kubernetes/pkg/registry/core/endpoint/storage"
	limitrangestore "k8s.io/kubernetes/pkg/registry/core/limitrange/storage"
	nodestore "k8s.io/kubernetes/pkg/registry/core/node/storage"
	pvstore "k8s.io/kubernetes/pkg/registry/core/persistentvolume/storage"
	pvcstore "k8s.io/kubernetes/pkg/registry/core/persistentvolumeclaim/storage"
	podstore "k8s.io/kubernetes/pkg/registry/core/pod/storage"
	podtemplatestore "k8s.io/kubernetes/pkg/registry/core/podtemplate/storage"
	serviceaccountstore "k8s.io/kubernetes/pkg/registry/core/serviceaccount/storage"
)

// coreProvider builds the core ("") group from upstream's registries, as
// kube-apiserver's legacy storage provider does, except that Services
// allocate through kubeboot's allocators (package services) instead of
// ones the provider would build, and componentstatuses reports
// on components that run in the process through the components
// themselves (componentstatuses.go).
type coreProvider struct {
	generic    *corerest.GenericConfig
	loopback   *restclient.Config
	kubelet    kubeletclient.KubeletClientConfig
	transport  http.RoundTripper
	slices     proxy.EndpointSliceGetter
	authorizer authorizer.Authorizer
	// services build the Services registry and repair its allocations.
	services *services.Allocators
	// components are what componentstatuses reports on.
	components *componentStatuses
	// uncached builds a storage without a watch cache.
	uncached generic.StorageDecorator
}

// PostStartHook implements genericapiserver.PostStartHookProvider: the
// Service allocators' repair loops start with the group, where
// kube-apiserver starts them, so /readyz lists them in the same place.
func (p *coreProvider) PostStartHook() (string, genericapiserver.PostStartHookFunc, error) {
	return hookRepair, stopIsNotFailure(func(hc genericapiserver.PostStartHookContext) error {
		return p.services.StartRepairs(hc)
	}), nil
}

// GroupName implements controlplaneapiserver.RESTStorageProvider.
func (p *coreProvider) GroupName() string { return api.GroupName }

// uncachedServiceAccounts is a RESTOptionsGetter whose service account
// storage has no watch cache: the generic core group builds one that
// NewRESTStorage replaces at once, and a watch cache destroyed while it
// loads logs an error ("failed to sync with latest state").
type uncachedServiceAccounts struct {
	generic.RESTOptionsGetter
	uncached generic.StorageDecorator
}

func (o uncachedServiceAccounts) GetRESTOptions(gr schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := o.RESTOptionsGetter.GetRESTOptions(gr, example)
	if err == nil && gr == api.Resource("serviceaccounts") {
		opts.Decorator = o.uncached
	}
	return opts, err
}

// NewRESTStorage implements controlplaneapiserver.RESTStorageProvider:
// the generic core group's storages (secrets, configmaps, namespaces,
// events, resourcequotas, serviceaccounts), then those it has not got:
// nodes, pods and Services (newWorkloads), service accounts again with
// tokens bound to pods and nodes (addServiceAccounts), and the rest of
// the group (addOthers). What is built is destroyed again if a later step
// fails (the storages' Destroy is idempotent).
func (p *coreProvider) NewRESTStorage(resources serverstorage.APIResourceConfigSource, opts generic.RESTOptionsGetter) (_ genericapiserver.APIGroupInfo, err error) {
	enabled := func(resource string) bool {
		return resources.ResourceEnabled(corev1.SchemeGroupVersion.WithResource(resource))
	}
	rebuildServiceAccounts := enabled("serviceaccounts") && p.generic.ServiceAccountIssuer != nil
	genericOpts := opts
	if rebuildServiceAccounts {
		genericOpts = uncachedServiceAccounts{opts, p.uncached}
	}
	info, err := p.generic.NewRESTStorage(resources, genericOpts)
	if err != nil {
		return genericapiserver.APIGroupInfo{}, err
	}
	storage := info.VersionedResourcesStorageMap["v1"]
	if storage == nil {
		storage = map[string]rest.Storage{}
	}
	var built []rest.Storage
	defer func() {
		if err != nil {
			for _, s := range storage {
				s.Destroy()
			}
			for _, s := range built {
				s.Destroy()
			}
		}
	}()

	w, err := p.newWorkloads(opts, &built)
	if err != nil {
		return genericapiserver.APIGroupInfo{}, err
	}
	w.add(storage, enabled)
	if enabled("componentstatuses") {
		storage["componentstatuses"] = componentstatus.NewStorage(p.components.list)
	}
	if rebuildServiceAccounts {
		if err := p.addServiceAccounts(storage, opts, w); err != nil {
			return genericapiserver.APIGroupInfo{}, fmt.Errorf("serviceaccount storage: %w", err)
		}
	}
	if err := addOthers(storage, opts, enabled); err != nil {
		return genericapiserver.APIGroupInfo{}, err
	}
	info.VersionedResourcesStorageMap["v1"] = storage
	return info, nil
}

// workloads are the storages of nodes, pods (which reach kubelets through
// the nodes, and evict through PodDisruptionBudgets) and Services (which
// proxy to the pods).
type workloads struct {
	nodes                       *nodestore.NodeStorage
	pods                        podstore.PodStorage
	services                    *services.REST
	serviceStatus, serviceProxy rest.Storage
}

// newWorkloads builds the workloads' storages, each appended to built
// once it is.
func (p *coreProvider) newWorkloads(opts generic.RESTOptionsGetter, built *[]rest.Storage) (*workloads, error) {
	pdbs, err := policyclient.NewForConfig(p.loopback)
	if err != nil {
		return nil, fmt.Errorf("pod storage: %w", err)
	}
	w := &workloads{}
	if w.nodes, err = nodestore.NewStorage(opts, p.kubelet, p.transport); err != nil {
		return nil, fmt.Errorf("node storage: %w", err)
	}
	*built = append(*built, w.nodes.Node)
	kubelets := simulatedNodeKubelets{w.nodes.KubeletConnectionInfo, w.nodes.Node}
	w.nodes.Proxy.Connection = kubelets
	if w.pods, err = podstore.NewStorage(opts, kubelets, p.transport, pdbs, p.authorizer); err != nil {
		return nil, fmt.Errorf("pod storage: %w", err)
	}
	*built = append(*built, w.pods.Pod)
	if w.services, w.serviceStatus, w.serviceProxy, err = p.services.NewREST(opts, w.pods.Pod, p.slices, p.transport); err != nil {
		return nil, fmt.Errorf("service storage: %w", err)
	}
	*built = append(*built, w.services)
	return w, nil
}

// add puts the workloads' enabled resources and subresources in storage.
func (w *workloads) add(storage map[string]rest.Storage, enabled func(string) bool) {
	if enabled("pods") {
		pods := w.pods
		storage["pods"] = pods.Pod
		storage["pods/attach"] = pods.Attach
		storage["pods/status"] = pods.Status
		storage["pods/log"] = pods.Log
		storage["pods/exec"] = pods.Exec
		storage["pods/portforward"] = pods.PortForward
		storage["pods/proxy"] = pods.Proxy
		storage["pods/binding"] = pods.Binding
		if pods.Eviction != nil {
			storage["pods/eviction"] = pods.Eviction
		}
		storage["pods/ephemeralcontainers"] = pods.EphemeralContainers
		if utilfeature.DefaultFeatureGate.Enabled(features.InPlacePodVerticalScaling) {
			storage["pods/resize"] = pods.Resize
		}
	}
	if enabled("bindings") {
		storage["bindings"] = w.pods.LegacyBinding
	}
	if enabled("nodes") {
		storage["nodes"] = w.nodes.Node
		storage["nodes/proxy"] = w.nodes.Proxy
		storage["nodes/status"] = w.nodes.Status
	}
	if enabled("services") {
		storage["services"] = w.services
		storage["services/proxy"] = w.serviceProxy
		storage["services/status"] = w.serviceStatus
	}
}

// addServiceAccounts replaces the generic group's service accounts, whose
// tokens cannot be bound to pods and nodes it has not got, with ones
// built on w's.
func (p *coreProvider) addServiceAccounts(storage map[string]rest.Storage, opts generic.RESTOptionsGetter, w *workloads) error {
	webhooks, err := admissionregistrationv1client.NewForConfig(p.loopback)
	if err != nil {
		return err
	}
	var nodeGetter rest.Getter
	if utilfeature.DefaultFeatureGate.Enabled(features.ServiceAccountTokenNodeBinding) ||
		utilfeature.DefaultFeatureGate.Enabled(features.ServiceAccountTokenPodNodeInfo) {
		nodeGetter = w.nodes.Node.Store
	}
	sa, err := serviceaccountstore.NewREST(opts, p.generic.ServiceAccountIssuer, p.generic.APIAudiences, p.authorizer,
		p.generic.ServiceAccountMaxExpiration, w.pods.Pod.Store, storage["secrets"].(rest.Getter), nodeGetter,
		webhooks.ValidatingWebhookConfigurations(), webhooks.MutatingWebhookConfigurations(),
		p.generic.ExtendExpiration, p.generic.MaxExtendedExpiration)
	if err != nil {
		return err
	}
	storage["serviceaccounts"].Destroy()
	storage["serviceaccounts"] = sa
	if sa.Token != nil {
		storage["serviceaccounts/token"] = sa.Token
	}
	return nil
}

// addOthers puts the rest of the core group's enabled resources in
// storage, each built on its upstream registry.
func addOthers(storage map[string]rest.Storage, opts generic.RESTOptionsGetter, enabled func(string) bool) error {
	type builder struct {
		resource string
		build    func() (map[string]rest.Storage, error)
	}
	for _, b := range []builder{
		{"podtemplates", func() (map[string]rest.Storage, error) {
			s, err := podtemplatestore.NewREST(opts)
			return map[string]rest.Storage{"": s}, err
		}},
		{"replicationcontrollers", func() (map[string]rest.Storage, error) {
			s, err := controllerstore.NewStorage(opts)
			if err != nil {
				return nil, err
			}
			out := map[string]rest.Storage{"": s.Controller, "/status": s.Status}
			if legacyscheme.Scheme.IsVersionRegistered(schema.GroupVersion{Group: "autoscaling", Version: "v1"}) {
				out["/scale"] = s.Scale
			}
			return out, nil
		}},
		{"endpoints", func() (map[string]rest.Storage, error) {
			s, err := endpointsstore.NewREST(opts)
			return map[string]rest.Storage{"": s}, err
		}},
		{"limitranges", func() (map[string]rest.Storage, error) {
			s, err := limitrangestore.NewREST(opts)
			return map[string]rest.Storage{"": s}, err
		}},
		{"persistentvolumes", func() (map[string]rest.Storage, error) {
			s, status, err := pvstore.NewREST(opts)
			return map[string]rest.Storage{"": s, "/status": status}, err
		}},
		{"persistentvolumeclaims", func() (map[string]rest.Storage, error) {
			s, status, err := pvcstore.NewREST(opts)
			return map[string]rest.Storage{"": s, "/status": status}, err
		}},
	} {
		if !enabled(b.resource) {
			continue
		}
		subs, err := b.build()
		if err != nil {
			return fmt.Errorf("%s storage: %w", b.resource, err)
		}
		for sub, s := range subs {
			storage[b.resource+sub] = s
		}
	}
	return nil
}

// kubeletClientConfig is how the server reaches kubelets (pods/log, exec,
// nodes/proxy), with the client certificate in certFile and keyFile if
// set. The addresses are tried in kubeadm's order
// (--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname), not
// kube-apiserver's, which tries the node's hostname first: a hostname
// often does not resolve on a small cluster without DNS for its nodes.
func kubeletClientConfig(certFile, keyFile, caFile string, egress *egressselector.EgressSelector) kubeletclient.KubeletClientConfig {
	c := kubeletclient.KubeletClientConfig{
		Port:         10250,
		ReadOnlyPort: 10255,
		PreferredAddressTypes: []string{
			string(api.NodeInternalIP),
			string(api.NodeExternalIP),
			string(api.NodeHostName),
		},
		TLSClientConfig: kubeletclient.KubeletTLSConfig{CertFile: certFile, KeyFile: keyFile, CAFile: caFile},
		HTTPTimeout:     5 * time.Second,
	}
	if egress != nil {
		c.Lookup = egress.Lookup
	}
	return c
}
