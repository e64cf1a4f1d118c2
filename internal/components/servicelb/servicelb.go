// Package servicelb gives LoadBalancer Services the nodes' addresses, k3s's
// ServiceLB on upstream's kube-proxy: a Service of type LoadBalancer with
// no loadBalancerClass gets, as its load balancer ingress, the addresses of
// the Ready nodes (ExternalIP where a node has one, else InternalIP, of
// the Service's IP families), and kube-proxy on each node leads the
// Service's ports at those addresses to its endpoints, as it does for
// any load balancer IP; no Pod runs for it. A port one LoadBalancer
// Service holds is not given to another: the later one stays pending,
// with a PortInUse event, until the port is free.
package servicelb

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/lbnodes"
)

// User is the user the controller acts as.
const User = "system:kubeboot:servicelb"

// Component is the controller as a component of a server.
type Component struct{}

// New returns the controller.
func New() *Component { return &Component{} }

// Name implements controlplane.Component.
func (*Component) Name() string { return "service load balancer" }

// Complete implements controlplane.Component.
func (*Component) Complete(controlplane.Settings) (controlplane.Needs, error) {
	return controlplane.Needs{
		User: User,
		Grant: controlplane.GrantClusterRole(User, User,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services", "nodes"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services/status"}, Verbs: []string{"update"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		),
		Allowed: authorizationv1.ResourceAttributes{Verb: "update", Resource: "services", Subresource: "status"},
	}, nil
}

// Run implements controlplane.Component.
func (*Component) Run(ctx context.Context, s *controlplane.Server) error {
	client, err := s.Client(User)
	if err != nil {
		return err
	}
	// Its Nodes are the copies the process's other informers hold.
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(s.SharedObjects().Transform))
	services, nodes := factory.Core().V1().Services(), factory.Core().V1().Nodes()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "servicelb"})
	defer queue.ShutDown()
	enqueueAll := func(any) {
		all, _ := services.Lister().List(labels.Everything())
		for _, svc := range all {
			if managed(svc) {
				queue.Add(cache.MetaObjectToName(svc).String())
			}
		}
	}
	// A change of one load balancer can free or take a port another waits
	// for; other Services' changes (most of them) concern none.
	isManaged := func(obj any) bool {
		svc, ok := obj.(*corev1.Service)
		if tomb, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
			svc, ok = tomb.Obj.(*corev1.Service)
		}
		return ok && managed(svc)
	}
	if _, err := services.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if isManaged(obj) {
				enqueueAll(obj)
			}
		},
		UpdateFunc: func(old, obj any) {
			if isManaged(old) || isManaged(obj) {
				enqueueAll(obj)
			}
		},
		DeleteFunc: func(obj any) {
			if isManaged(obj) {
				enqueueAll(obj)
			}
		}}); err != nil {
		return err
	}
	// Only what Ingress reads of a Node: not its heartbeats.
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueueAll, UpdateFunc: func(old, obj any) {
			if o, n := old.(*corev1.Node), obj.(*corev1.Node); lbnodes.Eligible(o) != lbnodes.Eligible(n) || !slices.Equal(lbnodes.Addresses(o), lbnodes.Addresses(n)) {
				enqueueAll(obj)
			}
		}, DeleteFunc: enqueueAll}); err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	c := controller{client: client, services: services.Lister(), nodes: nodes.Lister(),
		recorder: broadcaster.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: "servicelb"})}
	factory.StartWithContext(ctx)
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), services.Informer().HasSynced, nodes.Informer().HasSynced) {
		return nil
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for c.processNext(ctx, queue) {
		}
	}, time.Second)
	<-ctx.Done()
	return nil
}

// controller sets the load balancer status of Services.
type controller struct {
	client   kubernetes.Interface
	services corelisters.ServiceLister
	nodes    corelisters.NodeLister
	recorder record.EventRecorder
}

func (c controller) processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string]) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		klog.FromContext(ctx).Error(err, "Setting a LoadBalancer Service's addresses", "service", key)
		queue.AddRateLimited(key)
		return true
	}
	queue.Forget(key)
	return true
}

// sync sets the Service key's load balancer ingress to what it should be.
func (c controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	svc, err := c.services.Services(namespace).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && !managed(svc)) {
		return nil
	}
	if err != nil {
		return err
	}
	all, err := c.services.List(labels.Everything())
	if err != nil {
		return err
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	var ingress []corev1.LoadBalancerIngress
	if holder, port := portHolder(svc, all); holder != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "PortInUse", "%s port %d is the load balancer port of Service %s/%s: this Service waits until it is free",
			port.Protocol, port.Port, holder.Namespace, holder.Name)
	} else {
		ingress = Ingress(svc, nodes)
	}
	if apiequality.Semantic.DeepEqual(svc.Status.LoadBalancer.Ingress, ingress) {
		return nil
	}
	svc = svc.DeepCopy()
	svc.Status.LoadBalancer.Ingress = ingress
	_, err = c.client.CoreV1().Services(namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // the informer brings the change
	}
	if err == nil && len(ingress) > 0 {
		c.recorder.Eventf(svc, corev1.EventTypeNormal, "AddressesSet", "load balancer addresses: %s", ingressIPs(ingress))
	}
	return err
}

// managed reports whether svc is a load balancer this controller serves.
func managed(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil
}

// portHolder is the managed Service other than svc, created before it
// (by name on a tie), that holds one of svc's ports, and that port; nil
// if none.
func portHolder(svc *corev1.Service, all []*corev1.Service) (*corev1.Service, *corev1.ServicePort) {
	for _, other := range all {
		if other.UID == svc.UID || !managed(other) || !before(other, svc) {
			continue
		}
		for i, p := range svc.Spec.Ports {
			if slices.ContainsFunc(other.Spec.Ports, func(o corev1.ServicePort) bool { return o.Port == p.Port && o.Protocol == p.Protocol }) {
				return other, &svc.Spec.Ports[i]
			}
		}
	}
	return nil, nil
}

func before(a, b *corev1.Service) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// Ingress is svc's load balancer ingress on nodes: the address of each
// Ready node not excluded from load balancers, of svc's IP families
// (its ExternalIP if it has one, else its InternalIP), sorted.
func Ingress(svc *corev1.Service, nodes []*corev1.Node) []corev1.LoadBalancerIngress {
	families := map[bool]bool{} // Is4
	for _, f := range svc.Spec.IPFamilies {
		families[f == corev1.IPv4Protocol] = true
	}
	if len(families) == 0 {
		families[true] = true
	}
	seen := map[netip.Addr]bool{}
	var addrs []netip.Addr
	for _, n := range nodes {
		if !lbnodes.Eligible(n) {
			continue
		}
		for _, a := range lbnodes.Addresses(n) {
			if families[a.Is4()] && !seen[a] {
				seen[a] = true
				addrs = append(addrs, a)
			}
		}
	}
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	var ingress []corev1.LoadBalancerIngress
	for _, a := range addrs {
		ingress = append(ingress, corev1.LoadBalancerIngress{IP: a.String(), IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)})
	}
	return ingress
}

func ingressIPs(ingress []corev1.LoadBalancerIngress) string {
	var ips []string
	for _, i := range ingress {
		ips = append(ips, i.IP)
	}
	return strings.Join(ips, ", ")
}
