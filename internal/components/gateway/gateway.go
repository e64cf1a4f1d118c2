// Package gateway serves traffic into the cluster: the Gateway API (its
// standard channel's CustomResourceDefinitions, installed and kept, and a
// GatewayClass kubeboot) and Ingress (a default IngressClass kubeboot),
// on every node that runs kubeboot's data plane (dataplane: `server
// --node`, agents), at the nodes' own addresses, as ServiceLB serves
// LoadBalancer Services.
//
// The server's part (Component) decides what every node serves and what
// every status says, as a Gateway API controller does (model.go, on the
// leader of its lease), and publishes the nodes' configuration in one
// Secret; until the cluster has a Gateway, an Ingress or a GatewayClass of
// its own, it holds no lease, informer or worker.
package gateway

import (
	"cmp"
	"context"
	"embed"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/spf13/pflag"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/apiserver/crdinstall"
	"github.com/kubeboot/kubeboot/internal/components/election"
	"github.com/kubeboot/kubeboot/internal/components/gateway/dataplane"
	"github.com/kubeboot/kubeboot/internal/platform/nodejoin"
	"github.com/kubeboot/kubeboot/internal/platform/presence"
)

//go:generate go run ../../../hack/gatewaycrds

//go:embed crds
var crdFS embed.FS

// Name is the component's, and its lease's.
const Name = "gateway-controller"

// User is the user the component acts as.
const User = "system:kubeboot:gateway-controller"

// fieldManager applies what the component installs.
const fieldManager = "kubeboot-gateway"

// ClassName is kubeboot's GatewayClass.
const ClassName = "kubeboot"

// The release channels of the Gateway API's CustomResourceDefinitions.
const (
	ChannelStandard     = "standard"
	ChannelExperimental = "experimental"
)

// servedKinds are the standard channel's kinds the nodes serve, whose
// CRDs the server installs by default: each CRD costs every server
// memory and start time (docs/performance.md), so the kinds no controller
// of the cluster serves (TCPRoute, UDPRoute) are left to
// --gateway-api-channel.
var servedKinds = []string{"gatewayclasses", "gateways", "httproutes", "grpcroutes", "tlsroutes", "referencegrants", "backendtlspolicies", "listenersets"}

// installRetryCap bounds the wait between tries of the install.
const installRetryCap = 30 * time.Second

// Options are the component's flags.
type Options struct {
	// Gateway is whether the Gateway API is served (off with
	// --disable=gateway-api). Default: on.
	Gateway bool
	// Channel is the release channel whose every CRD is installed
	// (--gateway-api-channel): standard or experimental. Default: none,
	// the standard channel's kinds the nodes serve (servedKinds).
	Channel string
	// Ingress is how Ingresses are served; nil: not (--disable=ingress).
	Ingress *IngressOptions
	// Addresses is the range each Gateway's own address comes from, held
	// on its network by one of the nodes (--gateway-addresses). Default:
	// none, every Gateway has the serving nodes' addresses.
	Addresses *dataplane.AddressRange
}

// NewOptions returns the defaults: both served, Ingresses on ports 80
// and 443.
func NewOptions() *Options {
	return &Options{Gateway: true, Ingress: &IngressOptions{HTTPPort: 80, HTTPSPort: 443}}
}

// AddFlags registers the flags on fs; --disable=gateway-api and
// --disable=ingress are the server's.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Channel, "gateway-api-channel", o.Channel,
		"Install every CustomResourceDefinition of this Gateway API release channel, standard or experimental, for other controllers' kinds (default: only the kinds kubeboot's nodes serve: GatewayClass, Gateway, HTTPRoute, GRPCRoute, TLSRoute, ReferenceGrant, BackendTLSPolicy, ListenerSet).")
	fs.Var(addressRangeValue{&o.Addresses}, "gateway-addresses",
		"Give each Gateway an address of its own from this range, a prefix (198.51.100.96/28) or first-last (198.51.100.100-198.51.100.120) on the nodes' network, which one serving node holds and answers for (default: none, every Gateway has the nodes' own addresses, as Ingresses do).")
	fs.Int32Var(&o.Ingress.HTTPPort, "ingress-http-port", o.Ingress.HTTPPort,
		"The port of every node that serves Ingresses over HTTP (0: none).")
	fs.Int32Var(&o.Ingress.HTTPSPort, "ingress-https-port", o.Ingress.HTTPSPort,
		"The port of every node that serves Ingresses over HTTPS, with their TLS Secrets' certificates (0: none).")
}

// Validate checks the options; each problem names its flag.
func (o *Options) Validate() error {
	if o.Channel != "" && o.Channel != ChannelStandard && o.Channel != ChannelExperimental {
		return fmt.Errorf("--gateway-api-channel %q: want %s or %s", o.Channel, ChannelStandard, ChannelExperimental)
	}
	if i := o.Ingress; i != nil {
		for flag, p := range map[string]int32{"--ingress-http-port": i.HTTPPort, "--ingress-https-port": i.HTTPSPort} {
			if p < 0 || p > 65535 {
				return fmt.Errorf("%s %d is not a port (0: none)", flag, p)
			}
		}
		if i.HTTPPort != 0 && i.HTTPPort == i.HTTPSPort {
			return fmt.Errorf("--ingress-http-port and --ingress-https-port are both %d", i.HTTPPort)
		}
	}
	return nil
}

// Component serves Gateways and Ingresses from the server's side.
type Component struct {
	opts     Options
	election componentbaseconfig.LeaderElectionConfiguration
	crds     []crdinstall.CRD
	policies [][]byte // the CRDs' ValidatingAdmissionPolicy and its binding, YAML
	// controllersWait bounds how long the CRDs' install waits for the
	// controller manager (waitForControllers): a cluster that runs none
	// still gets the Gateway API.
	controllersWait time.Duration
}

// New returns the component with opts; it leads through a lease with
// election's settings (kube-controller-manager's --leader-elect flags).
func New(opts Options, election componentbaseconfig.LeaderElectionConfiguration) *Component {
	election.ResourceName, election.ResourceNamespace = Name, metav1.NamespaceSystem
	return &Component{opts: opts, election: election, controllersWait: 10 * time.Second}
}

// Name implements controlplane.Component.
func (*Component) Name() string { return "gateway" }

// Complete implements controlplane.Component.
func (c *Component) Complete(controlplane.Settings) (controlplane.Needs, error) {
	return controlplane.Needs{
		User:    User,
		Grant:   grant,
		Allowed: authorizationv1.ResourceAttributes{Verb: "create", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
	}, nil
}

// readCRDs parses the embedded CRDs of the channel (or the served kinds'
// of the standard one); its admission policy's documents are kept apart.
func (c *Component) readCRDs() error {
	if c.crds != nil {
		return nil // read by an earlier try of the install
	}
	channel := cmp.Or(c.opts.Channel, ChannelStandard)
	dir := path.Join("crds", channel)
	entries, err := fs.ReadDir(crdFS, dir)
	if err != nil {
		return err
	}
	var all []crdinstall.CRD
	var policies [][]byte
	for _, e := range entries {
		data, err := crdFS.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		if strings.Contains(e.Name(), "_vap_") {
			for doc := range strings.SplitSeq(string(data), "\n---") {
				if strings.Contains(doc, "kind:") {
					policies = append(policies, []byte(doc))
				}
			}
			continue
		}
		if c.opts.Channel == "" && !slices.ContainsFunc(servedKinds, func(k string) bool { return strings.Contains(e.Name(), "_"+k+".") }) {
			continue
		}
		crds, err := crdinstall.Parse(path.Join("gateway", dir, e.Name()), data)
		if err != nil {
			return err
		}
		all = append(all, crds...)
	}
	c.crds, c.policies = all, policies
	return nil
}

// Run implements controlplane.Component: every server installs the CRDs
// and classes (the same objects), or removes the classes of what is
// disabled; once the cluster has work for it, the controller runs while
// it leads.
func (c *Component) Run(ctx context.Context, s *controlplane.Server) error {
	logger := klog.FromContext(ctx).WithName("gateway")
	ctx = klog.NewContext(ctx, logger)
	config, err := s.ClientConfig(User)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	gw, err := gatewayclient.NewForConfig(config)
	if err != nil {
		return err
	}
	if c.opts.Gateway {
		waitForControllers(ctx, kube, c.controllersWait)
	}
	// What another server or etcd's election makes fail for a moment
	// (a write timed out while a member is lost) is tried again: it must
	// not stop the server.
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Steps: math.MaxInt32, Cap: installRetryCap}
	if err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		if err := c.install(ctx, config, kube, gw); err != nil {
			logger.Error(err, "Installing the Gateway API's kinds and classes failed; tried again")
			return false, nil
		}
		return true, nil
	}); err != nil {
		return nil // ctx is done
	}
	if !c.opts.Gateway && c.opts.Ingress == nil {
		return nil
	}
	if err := presence.WaitAny(ctx, c.work(kube, gw)...); err != nil {
		return nil
	}
	logger.V(2).Info("The cluster has a Gateway, an Ingress or a GatewayClass: starting the controller")
	election.Lead(ctx, election.Config{Name: Name, Election: c.election, Client: config},
		func(ctx context.Context) error { return newController(c.opts, kube, gw, s.SharedObjects()).run(ctx) })
	return nil
}

// waitForControllers returns once the controller manager runs its
// controllers, which create the default namespace's default
// ServiceAccount (there already when a server restarts or joins), or
// after limit. Creating the Gateway API's CRDs costs the API server ~1.3 s
// of CPU (their validation compiles every CEL rule; the
// apiextensions controllers build each one's OpenAPI and status): on two
// cores, begun beside the controllers' start, it held a fresh server's
// controllers back by ~1 s (docs/performance.md).
func waitForControllers(ctx context.Context, kube kubernetes.Interface, limit time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	_ = presence.Wait(ctx, cache.NewFilteredListWatchFromClient(kube.CoreV1().RESTClient(), "serviceaccounts", metav1.NamespaceDefault,
		func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=default" }))
}

// install installs the CRDs and their admission policy and the classes
// of what is served, and removes the classes of what is not (and with
// nothing served, the nodes' configuration).
func (c *Component) install(ctx context.Context, config *rest.Config, kube kubernetes.Interface, gw gatewayclient.Interface) error {
	if c.opts.Gateway {
		// Read here, once the server is ready, not before it starts:
		// they are ~1 MB of YAML.
		if err := c.readCRDs(); err != nil {
			return err
		}
		if err := crdinstall.InstallWith(ctx, config, c.crds); err != nil {
			return fmt.Errorf("the Gateway API's kinds: %w", err)
		}
		if err := c.applyPolicies(ctx, config); err != nil {
			return err
		}
		if err := ensureGatewayClass(ctx, gw, c.opts); err != nil {
			return fmt.Errorf("GatewayClass %s: %w", ClassName, err)
		}
	} else if err := removeGatewayClass(ctx, gw); err != nil {
		return fmt.Errorf("GatewayClass %s: %w", ClassName, err)
	}
	if c.opts.Ingress != nil {
		return ensureIngressClass(ctx, kube)
	}
	if err := removeIngressClass(ctx, kube); err != nil {
		return err
	}
	if !c.opts.Gateway {
		// Nothing is served: the nodes' configuration goes too.
		return ignoreNotFound(kube.CoreV1().Secrets(dataplane.Namespace).Delete(ctx, dataplane.SecretName, metav1.DeleteOptions{}))
	}
	return nil
}

// applyPolicies applies the CRDs' ValidatingAdmissionPolicy (which keeps
// older Gateway API bundles from replacing them) and its binding.
func (c *Component) applyPolicies(ctx context.Context, config *rest.Config) error {
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return err
	}
	for _, doc := range c.policies {
		u := &unstructured.Unstructured{}
		if err := sigsyaml.Unmarshal(doc, &u.Object); err != nil {
			return err
		}
		gvr := admissionregistrationv1.SchemeGroupVersion.WithResource(map[string]string{
			"ValidatingAdmissionPolicy":        "validatingadmissionpolicies",
			"ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
		}[u.GetKind()])
		if _, err := dyn.Resource(gvr).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return fmt.Errorf("the Gateway API's %s: %w", u.GetKind(), err)
		}
	}
	return nil
}

// ensureGatewayClass creates kubeboot's GatewayClass if missing, and says
// it is accepted (its controller's status; the controller keeps it).
func ensureGatewayClass(ctx context.Context, gw gatewayclient.Interface, opts Options) error {
	classes := gw.GatewayV1().GatewayClasses()
	class, err := classes.Get(ctx, ClassName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		class, err = classes.Create(ctx, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: ClassName},
			Spec: gatewayv1.GatewayClassSpec{ControllerName: ControllerName,
				Description: ptr.To("Gateways served by every kubeboot node, at the nodes' addresses")}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Another server of the cluster, starting too, made it.
			class, err = classes.Get(ctx, ClassName, metav1.GetOptions{})
		}
	}
	if err != nil || class.Spec.ControllerName != ControllerName {
		return err
	}
	// A conflict is another server's write of the same status: the
	// controller's leader keeps it.
	if err := updateClassStatus(ctx, gw, class, opts); err != nil && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// removeGatewayClass deletes kubeboot's GatewayClass, if it is kubeboot's.
// The CRDs stay: the users' objects live in them, and another
// implementation may serve them.
func removeGatewayClass(ctx context.Context, gw gatewayclient.Interface) error {
	class, err := gw.GatewayV1().GatewayClasses().Get(ctx, ClassName, metav1.GetOptions{})
	if err != nil || class.Spec.ControllerName != ControllerName {
		// NotFound too when the kinds were never installed.
		return ignoreNotFound(err)
	}
	return ignoreNotFound(gw.GatewayV1().GatewayClasses().Delete(ctx, ClassName, metav1.DeleteOptions{}))
}

// ensureIngressClass creates kubeboot's IngressClass, the cluster's default,
// if missing.
func ensureIngressClass(ctx context.Context, kube kubernetes.Interface) error {
	_, err := kube.NetworkingV1().IngressClasses().Create(ctx, &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: IngressClassName, Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
		Spec:       networkingv1.IngressClassSpec{Controller: IngressController},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// removeIngressClass deletes kubeboot's IngressClass, if it is kubeboot's.
func removeIngressClass(ctx context.Context, kube kubernetes.Interface) error {
	class, err := kube.NetworkingV1().IngressClasses().Get(ctx, IngressClassName, metav1.GetOptions{})
	if err != nil || class.Spec.Controller != IngressController {
		return ignoreNotFound(err)
	}
	return ignoreNotFound(kube.NetworkingV1().IngressClasses().Delete(ctx, IngressClassName, metav1.DeleteOptions{}))
}

// work are what starts the controller: a Gateway, an Ingress, or a
// GatewayClass besides kubeboot's (one that may name its controller).
func (c *Component) work(kube kubernetes.Interface, gw gatewayclient.Interface) []cache.ListerWatcherWithContext {
	var lws []cache.ListerWatcherWithContext
	if c.opts.Gateway {
		notOurs := func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name!=" + ClassName }
		v1 := gw.GatewayV1().RESTClient()
		lws = append(lws, cache.NewListWatchFromClient(v1, "gateways", "", fields.Everything()),
			cache.NewFilteredListWatchFromClient(v1, "gatewayclasses", "", notOurs))
	}
	if c.opts.Ingress != nil {
		lws = append(lws, cache.NewListWatchFromClient(kube.NetworkingV1().RESTClient(), "ingresses", "", fields.Everything()))
	}
	return lws
}

// grant gives the component its rights, and the nodes' agents theirs:
// the published configuration and the EndpointSlices they proxy to.
func grant(ctx context.Context, client kubernetes.Interface) error {
	agents := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: nodejoin.AgentsGroup}}
	read := []string{"get", "list", "watch"}
	for _, g := range []func(context.Context, kubernetes.Interface) error{
		controlplane.GrantClusterRole(User, User,
			rbacv1.PolicyRule{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"*"}, Verbs: read},
			rbacv1.PolicyRule{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"*/status"}, Verbs: []string{"update", "patch"}},
			rbacv1.PolicyRule{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"gatewayclasses"}, Verbs: []string{"create", "delete"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces", "services", "nodes", "secrets", "configmaps"}, Verbs: read},
			rbacv1.PolicyRule{APIGroups: []string{networkingv1.GroupName}, Resources: []string{"ingresses", "ingressclasses"}, Verbs: read},
			rbacv1.PolicyRule{APIGroups: []string{networkingv1.GroupName}, Resources: []string{"ingresses/status"}, Verbs: []string{"update"}},
			rbacv1.PolicyRule{APIGroups: []string{networkingv1.GroupName}, Resources: []string{"ingressclasses"}, Verbs: []string{"create", "delete"}},
			rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
			rbacv1.PolicyRule{APIGroups: []string{admissionregistrationv1.GroupName}, Resources: []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"},
				Verbs: []string{"get", "create", "update", "patch"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		),
		controlplane.GrantRole(metav1.NamespaceSystem, User, User,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{dataplane.SecretName, defaultCertificateName},
				Verbs: []string{"update", "delete"}},
			rbacv1.PolicyRule{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		),
		controlplane.GrantRole(metav1.NamespaceDefault, User, User,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{"default"}, Verbs: read}),
		controlplane.GrantClusterRoleTo("kubeboot:gateway-nodes", agents,
			rbacv1.PolicyRule{APIGroups: []string{discoveryv1.GroupName}, Resources: []string{"endpointslices"}, Verbs: read}),
		controlplane.GrantRoleTo(dataplane.Namespace, "kubeboot:gateway-nodes", agents,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{dataplane.SecretName}, Verbs: read}),
	} {
		if err := g(ctx, client); err != nil {
			return err
		}
	}
	return nil
}

// ignoreNotFound is err, but nil for NotFound.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
