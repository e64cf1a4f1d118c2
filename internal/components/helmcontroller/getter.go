package helmcontroller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// clientGetter is Helm's way to its clients (genericclioptions'
// RESTClientGetter, what kubectl's flags give it) for the controller's
// in-process client, in one namespace.
type clientGetter struct {
	config    *rest.Config
	namespace string
	// discovery and mapper are shared by every release's clients.
	discovery discovery.CachedDiscoveryInterface
	mapper    meta.RESTMapper
}

var _ genericclioptions.RESTClientGetter = (*clientGetter)(nil)

// ToRESTConfig implements genericclioptions.RESTClientGetter.
func (g *clientGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.config), nil }

// ToDiscoveryClient implements genericclioptions.RESTClientGetter.
func (g *clientGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.discovery, nil
}

// ToRESTMapper implements genericclioptions.RESTClientGetter.
func (g *clientGetter) ToRESTMapper() (meta.RESTMapper, error) { return g.mapper, nil }

// ToRawKubeConfigLoader implements genericclioptions.RESTClientGetter: a
// kubeconfig of the namespace alone (Helm's client is given it directly:
// a kubeconfig without a cluster is not usable, and says "default").
func (g *clientGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	cfg := clientcmdapi.NewConfig()
	cfg.Contexts["in-process"] = &clientcmdapi.Context{Namespace: g.namespace}
	cfg.CurrentContext = "in-process"
	return clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{})
}
