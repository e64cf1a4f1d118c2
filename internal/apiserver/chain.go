package apiserver

import (
	"fmt"
	"net/http"

	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	apiextensionsopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/apimachinery/pkg/runtime/schema"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	utilproxy "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/informers"
	aggregatorapiserver "k8s.io/kube-aggregator/pkg/apiserver"
	aggregatorscheme "k8s.io/kube-aggregator/pkg/apiserver/scheme"
	aggregatoropenapi "k8s.io/kube-aggregator/pkg/generated/openapi"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
	"k8s.io/kubernetes/pkg/api/legacyscheme"

	generatedopenapi "k8s.io/kubernetes/pkg/generated/openapi"

	"github.com/kubeboot/kubeboot/internal/apiserver/etcdstore"
)

// The server chain, as kube-apiserver's CreateServerChain: the
// apiextensions server (CustomResourceDefinitions) is the delegate behind
// the core server, and the aggregator (APIServices) stands in front;
// a request falls through from one to the next until one serves it.

// openAPIDefinitions are the definitions of every type the chain serves:
// kube-apiserver's, and those the apiextensions and aggregator modules
// publish with their generator.
func openAPIDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs := generatedopenapi.GetOpenAPIDefinitions(ref)
	for _, more := range []common.GetOpenAPIDefinitions{apiextensionsopenapi.GetOpenAPIDefinitions, aggregatoropenapi.GetOpenAPIDefinitions} {
		for k, v := range more(ref) {
			if _, ok := defs[k]; !ok {
				defs[k] = v
			}
		}
	}
	return defs
}

// withOpenAPI sets the OpenAPI configuration the servers of the chain
// share, as kube-apiserver's do: one definition namer over the schemes of
// all three, and one set of definitions, built once (DefaultOpenAPIV3Config
// builds them eagerly: ~8 MB of heap and tens of milliseconds per copy).
// The extension and aggregator servers' configs are copies of the core's,
// so they keep these pointers, except for their v2 definitions
// (withOwnDefinitions).
func withOpenAPI(c *genericapiserver.Config) {
	namer := openapinamer.NewDefinitionNamer(legacyscheme.Scheme, apiextensionsapiserver.Scheme, aggregatorscheme.Scheme)
	c.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openAPIDefinitions, namer)
	c.OpenAPIConfig.Info.Title = "Kubernetes"
	c.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openAPIDefinitions, namer)
	c.OpenAPIV3Config.Info.Title = "Kubernetes"
	// Set here, or kube-openapi's builders set it on the shared config the
	// first time they build a document, as a closure over that build's
	// state: the v2 builder's holds every generated definition (~10 MB
	// of heap) for the life of the process.
	c.OpenAPIConfig.GetOperationIDAndTagsFromRoute = operationIDAndTags
	c.OpenAPIV3Config.GetOperationIDAndTagsFromRoute = operationIDAndTags
}

// withOwnDefinitions is v2 with only a server's own generated definitions
// (its group's types and the meta types its routes use). The apiextensions
// server and the aggregator build their v2 documents in PrepareRun, at
// every start, and kube-openapi's v2 builder builds every definition its
// config gives (all of kube-apiserver's: tens of milliseconds and ~10 MB
// each time) to use the few their routes reach. The documents are the same.
func withOwnDefinitions(v2 *common.Config, own common.GetOpenAPIDefinitions) *common.Config {
	c := *v2
	c.GetDefinitions = own
	return &c
}

// operationIDAndTags names a route's OpenAPI operation as upstream's
// generic server does.
func operationIDAndTags(r common.Route) (string, []string, error) {
	route, ok := r.(*restfuladapter.RouteAdapter)
	if !ok {
		return "", nil, fmt.Errorf("route %s %s is not a go-restful route", r.Method(), r.Path())
	}
	return openapinamer.GetOperationIDAndTags(route.Route)
}

// newExtensionsServer builds the apiextensions server: the
// customresourcedefinitions resource and the custom resources it defines.
func newExtensionsServer(base genericapiserver.Config, backend *etcdstore.Backend, kubeInformers informers.SharedInformerFactory,
	resolver webhook.ServiceResolver, masterCount int) (*apiextensionsapiserver.CustomResourceDefinitions, error) {
	c := base
	c.RESTOptionsGetter = backend.WithSerializer(apiextensionsapiserver.Codecs)
	c.MergedResourceConfig = apiextensionsapiserver.DefaultAPIResourceConfigSource()
	// Only v1 has resources; an enabled v1beta1 would just be logged as empty.
	c.MergedResourceConfig.DisableVersions(schema.GroupVersion{Group: "apiextensions.k8s.io", Version: "v1beta1"})
	c.PostStartHooks = map[string]genericapiserver.PostStartHookConfigEntry{}
	c.OpenAPIConfig = withOwnDefinitions(c.OpenAPIConfig, apiextensionsopenapi.GetOpenAPIDefinitions)
	cfg := apiextensionsapiserver.Config{
		GenericConfig: &genericapiserver.RecommendedConfig{Config: c, SharedInformerFactory: kubeInformers},
		ExtraConfig: apiextensionsapiserver.ExtraConfig{
			CRDRESTOptionsGetter: backend.CustomResources(),
			MasterCount:          masterCount,
			ServiceResolver:      resolver,
			AuthResolverWrapper:  webhook.NewDefaultAuthenticationInfoResolverWrapper(nil, c.EgressSelector, c.LoopbackClientConfig, c.TracerProvider),
		},
	}
	s, err := cfg.Complete().New(genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("building the apiextensions server: %w", err)
	}
	return s, nil
}

// newAggregator builds the aggregator in front of delegate: the
// apiservices resource, and proxying of APIServices backed by a Service to
// that Service's endpoints (there is no kube-proxy to reach ClusterIPs).
func newAggregator(base genericapiserver.Config, backend *etcdstore.Backend, kubeInformers informers.SharedInformerFactory,
	resolver aggregatorapiserver.ServiceResolver, proxyCertFile, proxyKeyFile string,
	delegate genericapiserver.DelegationTarget) (*aggregatorapiserver.APIAggregator, error) {
	c := base
	c.RESTOptionsGetter = backend.WithSerializer(aggregatorscheme.Codecs)
	c.MergedResourceConfig = aggregatorapiserver.DefaultAPIResourceConfigSource()
	c.MergedResourceConfig.DisableVersions(schema.GroupVersion{Group: "apiregistration.k8s.io", Version: "v1beta1"})
	c.PostStartHooks = map[string]genericapiserver.PostStartHookConfigEntry{}
	// The aggregator serves /openapi/v2 and /openapi/v3 itself, merging
	// the documents of the whole chain (and of extension apiservers).
	c.SkipOpenAPIInstallation = true
	c.OpenAPIConfig = withOwnDefinitions(c.OpenAPIConfig, aggregatoropenapi.GetOpenAPIDefinitions)
	cfg := aggregatorapiserver.Config{
		GenericConfig: &genericapiserver.RecommendedConfig{Config: c, SharedInformerFactory: kubeInformers},
		ExtraConfig: aggregatorapiserver.ExtraConfig{
			ProxyClientCertFile: proxyCertFile,
			ProxyClientKeyFile:  proxyKeyFile,
			ServiceResolver:     resolver,
			ProxyTransport:      &http.Transport{},
		},
	}
	s, err := cfg.Complete().NewWithDelegate(delegate)
	if err != nil {
		return nil, fmt.Errorf("building the aggregator: %w", err)
	}
	return s, nil
}

// endpointResolver resolves a Service to one of its endpoints.
type endpointResolver struct {
	aggregatorapiserver.ServiceResolver
	// slices looks up a Service's EndpointSlices (also for the Service
	// registry's proxy subresource).
	slices utilproxy.EndpointSliceGetter
}

func newEndpointResolver(kubeInformers informers.SharedInformerFactory) (*endpointResolver, error) {
	slices, err := utilproxy.NewEndpointSliceListerGetter(kubeInformers.Discovery().V1().EndpointSlices().Lister())
	if err != nil {
		return nil, err
	}
	return &endpointResolver{aggregatorapiserver.NewEndpointServiceResolver(kubeInformers.Core().V1().Services().Lister(), slices), slices}, nil
}
