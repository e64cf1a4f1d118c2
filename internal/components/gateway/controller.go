package gateway

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	"github.com/kubeboot/kubeboot/internal/components/gateway/dataplane"
	"github.com/kubeboot/kubeboot/internal/platform/lbnodes"
	"github.com/kubeboot/kubeboot/internal/platform/sharedobjects"
	"github.com/kubeboot/kubeboot/internal/platform/simulated"
)

// Timing of the controller.
const (
	// minSyncInterval batches the changes of a moment into one pass.
	minSyncInterval = 100 * time.Millisecond
	// resyncInterval is how often a pass runs with nothing changed.
	resyncInterval = 5 * time.Minute
	// maxRetryInterval bounds the backoff after a failed pass.
	maxRetryInterval = 30 * time.Second
)

// controller keeps the nodes' Config and every status as the model of
// the cluster's objects says.
type controller struct {
	opts  Options
	kube  kubernetes.Interface
	gw    gatewayclient.Interface
	kubeF informers.SharedInformerFactory
	tlsF  informers.SharedInformerFactory
	gwF   gatewayinformers.SharedInformerFactory
	// published is the Config last published, without its generation,
	// and generation its generation.
	published  []byte
	generation int64
	// defaultCertificate is the Ingresses' default certificate, read (or
	// made) at the first pass that needs it.
	defaultCertificate *dataplane.Certificate
	// recorder tells, as events, of the problems the statuses newly say,
	// and told what it last told of each Ingress (which has no status to
	// compare with).
	recorder record.EventRecorder
	told     map[types.NamespacedName]string
}

// newController's informers of core kinds share the Nodes they cache
// through pool, as the process's other informers do.
func newController(opts Options, kube kubernetes.Interface, gw gatewayclient.Interface, pool *sharedobjects.Pool) *controller {
	return &controller{
		opts: opts, kube: kube, gw: gw,
		kubeF: informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(pool.Transform)),
		// Only the Secrets a listener or an Ingress can present.
		tlsF: informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS)).String()
		})),
		gwF:  gatewayinformers.NewSharedInformerFactory(gw, 0),
		told: map[types.NamespacedName]string{},
	}
}

// run runs passes until ctx is done: at each change of what the model
// reads, at most once per minSyncInterval, and every resyncInterval.
func (c *controller) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	changed := make(chan struct{}, 1)
	trigger := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if err := c.watch(trigger); err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	// A scheme of the Gateway API's kinds made here, not the clientset's
	// package's, whose init every start of the binary would pay.
	scheme := runtime.NewScheme()
	for _, install := range []func(*runtime.Scheme) error{gatewayv1.Install, networkingv1.AddToScheme} {
		if err := install(scheme); err != nil {
			return err
		}
	}
	c.recorder = broadcaster.NewRecorder(scheme, corev1.EventSource{Component: Name})
	for _, start := range []func(<-chan struct{}){c.kubeF.Start, c.tlsF.Start, c.gwF.Start} {
		start(ctx.Done())
	}
	defer c.kubeF.Shutdown()
	defer c.tlsF.Shutdown()
	defer c.gwF.Shutdown()
	c.kubeF.WaitForCacheSync(ctx.Done())
	c.tlsF.WaitForCacheSync(ctx.Done())
	c.gwF.WaitForCacheSync(ctx.Done())
	if err := c.readPublished(ctx); err != nil {
		return err
	}
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Steps: 1 << 30, Cap: maxRetryInterval}
	for {
		start := time.Now()
		select {
		case <-changed:
		default:
		}
		wait := resyncInterval
		if err := c.sync(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			logger.Error(err, "A pass of the Gateway controller failed; it is tried again")
			wait = backoff.Step()
		} else {
			backoff.Steps, backoff.Duration = 1<<30, time.Second
		}
		time.Sleep(max(0, minSyncInterval-time.Since(start)))
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-time.After(wait):
		}
	}
}

// watch registers trigger with every informer: a change of what the model
// reads. A Node's counts only when what it says of serving changes.
func (c *controller) watch(trigger func()) error {
	changed := cache.ResourceEventHandlerFuncs{AddFunc: func(any) { trigger() }, UpdateFunc: func(_, _ any) { trigger() }, DeleteFunc: func(any) { trigger() }}
	gv := c.gwF.Gateway().V1()
	for _, inf := range []cache.SharedIndexInformer{
		gv.GatewayClasses().Informer(), gv.Gateways().Informer(), gv.HTTPRoutes().Informer(), gv.GRPCRoutes().Informer(), gv.TLSRoutes().Informer(),
		gv.ReferenceGrants().Informer(), gv.BackendTLSPolicies().Informer(), gv.ListenerSets().Informer(),
		c.kubeF.Core().V1().Namespaces().Informer(), c.kubeF.Core().V1().Services().Informer(), c.kubeF.Core().V1().ConfigMaps().Informer(),
		c.kubeF.Networking().V1().Ingresses().Informer(), c.tlsF.Core().V1().Secrets().Informer(),
	} {
		if _, err := inf.AddEventHandler(changed); err != nil {
			return err
		}
	}
	_, err := c.kubeF.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { trigger() },
		DeleteFunc: func(any) { trigger() },
		UpdateFunc: func(old, obj any) {
			o, n := old.(*corev1.Node), obj.(*corev1.Node)
			if serving(o) != serving(n) || !slices.Equal(lbnodes.Addresses(o), lbnodes.Addresses(n)) {
				trigger()
			}
		},
	})
	return err
}

// serving reports whether n serves Gateways and Ingresses now: it runs
// kubeboot's data plane (it says which Config it serves), and answers
// for load balancers.
func serving(n *corev1.Node) bool {
	_, ok := n.Annotations[dataplane.GenerationAnnotation]
	return ok && lbnodes.Eligible(n) && !simulated.Node(n.Annotations)
}

// readPublished reads the Config published, whose generation the next
// one follows.
func (c *controller) readPublished(ctx context.Context) error {
	s, err := c.kube.CoreV1().Secrets(dataplane.Namespace).Get(ctx, dataplane.SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	cfg, err := dataplane.Decode(s.Data[dataplane.ConfigKey])
	if err != nil {
		return nil // another format's: the next publish replaces it
	}
	c.generation = cfg.Generation
	cfg.Generation = 0
	c.published, err = dataplane.Encode(cfg)
	return err
}

// sync is one pass: the model of the objects now, its Config published
// and its statuses written.
func (c *controller) sync(ctx context.Context) error {
	s, err := c.snapshot(ctx)
	if err != nil {
		return err
	}
	m := build(s)
	if err := c.publish(ctx, m); err != nil {
		return fmt.Errorf("publishing the nodes' configuration: %w", err)
	}
	return c.writeStatuses(ctx, m)
}

// snapshot reads what the model is built from.
func (c *controller) snapshot(ctx context.Context) (*snapshot, error) {
	gv := c.gwF.Gateway().V1()
	s := &snapshot{namespaces: map[string]*corev1.Namespace{}, services: map[types.NamespacedName]*corev1.Service{},
		secrets: map[types.NamespacedName]*corev1.Secret{}, configMaps: map[types.NamespacedName]*corev1.ConfigMap{}, heldPorts: map[int32]string{}}
	var err error
	if s.classes, err = gv.GatewayClasses().Lister().List(labels.Everything()); err != nil {
		return nil, err
	}
	if c.opts.Gateway {
		if s.gateways, err = gv.Gateways().Lister().List(labels.Everything()); err != nil {
			return nil, err
		}
		if s.routes, err = gv.HTTPRoutes().Lister().List(labels.Everything()); err != nil {
			return nil, err
		}
		if s.grpcRoutes, err = gv.GRPCRoutes().Lister().List(labels.Everything()); err != nil {
			return nil, err
		}
		if s.tlsRoutes, err = gv.TLSRoutes().Lister().List(labels.Everything()); err != nil {
			return nil, err
		}
		if s.grants, err = gv.ReferenceGrants().Lister().List(labels.Everything()); err != nil {
			return nil, err
		}
		if s.tlsPolicies, err = gv.BackendTLSPolicies().Lister().List(labels.Everything()); err != nil {
			return nil, err
		}
		if s.listenerSets, err = gv.ListenerSets().Lister().List(labels.Everything()); err != nil {
			return nil, err
		}
		configMaps, _ := c.kubeF.Core().V1().ConfigMaps().Lister().List(labels.Everything())
		for _, cm := range configMaps {
			s.configMaps[nameOf(cm)] = cm
		}
	} else {
		s.classes = nil
	}
	namespaces, _ := c.kubeF.Core().V1().Namespaces().Lister().List(labels.Everything())
	for _, n := range namespaces {
		s.namespaces[n.Name] = n
	}
	services, _ := c.kubeF.Core().V1().Services().Lister().List(labels.Everything())
	for _, svc := range services {
		s.services[types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}] = svc
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil && len(svc.Status.LoadBalancer.Ingress) > 0 {
			for _, p := range svc.Spec.Ports {
				if p.Protocol == corev1.ProtocolTCP || p.Protocol == "" {
					s.heldPorts[p.Port] = svc.Namespace + "/" + svc.Name
				}
			}
		}
	}
	secrets, _ := c.tlsF.Core().V1().Secrets().Lister().List(labels.Everything())
	for _, sec := range secrets {
		s.secrets[types.NamespacedName{Namespace: sec.Namespace, Name: sec.Name}] = sec
	}
	nodes, _ := c.kubeF.Core().V1().Nodes().Lister().List(labels.Everything())
	seen := map[netip.Addr]bool{}
	var addrs []netip.Addr
	for _, n := range nodes {
		if !serving(n) {
			continue
		}
		s.nodes = append(s.nodes, n.Name)
		for _, a := range lbnodes.Addresses(n) {
			if !seen[a] {
				seen[a] = true
				addrs = append(addrs, a)
			}
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	slices.Sort(s.nodes)
	s.pool = c.opts.Addresses
	for _, a := range addrs {
		s.addresses = append(s.addresses, a.String())
	}
	if c.opts.Ingress != nil {
		s.ingress = c.opts.Ingress
		if s.ingresses, err = c.kubeF.Networking().V1().Ingresses().Lister().List(labels.Everything()); err != nil {
			return nil, err
		}
		if c.defaultCertificate == nil {
			if c.defaultCertificate, err = ensureDefaultCertificate(ctx, c.kube); err != nil {
				return nil, err
			}
		}
		s.defaultCertificate = c.defaultCertificate
	}
	return s, nil
}

// publish writes m's Config for the nodes, at the next generation, when it
// differs from the last.
func (c *controller) publish(ctx context.Context, m *model) error {
	content, err := dataplane.Encode(m.config(0))
	if err != nil {
		return err
	}
	if c.published != nil && bytes.Equal(content, c.published) {
		return nil
	}
	data, err := dataplane.Encode(m.config(c.generation + 1))
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: dataplane.Namespace, Name: dataplane.SecretName},
		Data: map[string][]byte{dataplane.ConfigKey: data}}
	secrets := c.kube.CoreV1().Secrets(dataplane.Namespace)
	if _, err = secrets.Update(ctx, secret, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		_, err = secrets.Create(ctx, secret, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	c.generation++
	c.published = content
	klog.FromContext(ctx).V(2).Info("Published the nodes' configuration", "generation", c.generation, "bytes", len(data))
	return nil
}

// writeStatuses writes every status of m that differs from the object's.
func (c *controller) writeStatuses(ctx context.Context, m *model) error {
	gv := c.gwF.Gateway().V1()
	var errs []error
	for name, conds := range m.classes {
		class, err := gv.GatewayClasses().Lister().Get(name)
		if err != nil {
			continue
		}
		errs = append(errs, writeClass(ctx, c.gw, class, conds, supportedFeatures(c.opts)))
	}
	for nn, st := range m.gateways {
		g, err := gv.Gateways().Lister().Gateways(nn.Namespace).Get(nn.Name)
		if err != nil {
			continue
		}
		errs = append(errs, c.writeGateway(ctx, g, st))
	}
	for nn, st := range m.listenerSets {
		ls, err := gv.ListenerSets().Lister().ListenerSets(nn.Namespace).Get(nn.Name)
		if err != nil {
			continue
		}
		errs = append(errs, c.writeListenerSet(ctx, ls, st))
	}
	httpRoutes, _ := gv.HTTPRoutes().Lister().List(labels.Everything())
	errs = append(errs, writeRoutes(ctx, c.recorder, m, kindHTTPRoute, httpRoutes, func(r *gatewayv1.HTTPRoute) *gatewayv1.RouteStatus { return &r.Status.RouteStatus },
		func(ctx context.Context, r *gatewayv1.HTTPRoute) error {
			_, err := c.gw.GatewayV1().HTTPRoutes(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{})
			return err
		})...)
	grpcRoutes, _ := gv.GRPCRoutes().Lister().List(labels.Everything())
	errs = append(errs, writeRoutes(ctx, c.recorder, m, kindGRPCRoute, grpcRoutes, func(r *gatewayv1.GRPCRoute) *gatewayv1.RouteStatus { return &r.Status.RouteStatus },
		func(ctx context.Context, r *gatewayv1.GRPCRoute) error {
			_, err := c.gw.GatewayV1().GRPCRoutes(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{})
			return err
		})...)
	tlsRoutes, _ := gv.TLSRoutes().Lister().List(labels.Everything())
	errs = append(errs, writeRoutes(ctx, c.recorder, m, kindTLSRoute, tlsRoutes, func(r *gatewayv1.TLSRoute) *gatewayv1.RouteStatus { return &r.Status.RouteStatus },
		func(ctx context.Context, r *gatewayv1.TLSRoute) error {
			_, err := c.gw.GatewayV1().TLSRoutes(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{})
			return err
		})...)
	policies, _ := gv.BackendTLSPolicies().Lister().List(labels.Everything())
	errs = append(errs, c.writePolicies(ctx, m, policies)...)
	for nn, st := range m.ingresses {
		ing, err := c.kubeF.Networking().V1().Ingresses().Lister().Ingresses(nn.Namespace).Get(nn.Name)
		if err != nil {
			continue
		}
		// An Ingress has no conditions: what keeps it from a port is an
		// event, once each time it changes.
		if unserved := m.ingressUnserved[nn]; unserved != c.told[nn] {
			if unserved != "" {
				c.recorder.Event(ing, corev1.EventTypeWarning, string(gatewayv1.ListenerReasonPortUnavailable), unserved)
			}
			c.told[nn] = unserved
		}
		if equality.Semantic.DeepEqual(ing.Status.LoadBalancer, st) {
			continue
		}
		ing = ing.DeepCopy()
		ing.Status.LoadBalancer = st
		_, err = c.kube.NetworkingV1().Ingresses(nn.Namespace).UpdateStatus(ctx, ing, metav1.UpdateOptions{})
		errs = append(errs, ignoreNotFound(err))
	}
	return joinErrors(errs)
}

// merged is conds with want set: a condition whose status stays keeps
// its transition time.
func merged(conds []metav1.Condition, want []metav1.Condition) []metav1.Condition {
	out := slices.Clone(conds)
	keep := map[string]bool{}
	for _, w := range want {
		keep[w.Type] = true
		meta.SetStatusCondition(&out, w)
	}
	return slices.DeleteFunc(out, func(c metav1.Condition) bool { return !keep[c.Type] })
}

// writeClass writes class's conditions and the features the nodes serve,
// when they differ from its status.
func writeClass(ctx context.Context, gw gatewayclient.Interface, class *gatewayv1.GatewayClass, conds []metav1.Condition, features []gatewayv1.SupportedFeature) error {
	st := class.Status.DeepCopy()
	st.Conditions = merged(st.Conditions, conds)
	st.SupportedFeatures = features
	if equality.Semantic.DeepEqual(*st, class.Status) {
		return nil
	}
	class = class.DeepCopy()
	class.Status = *st
	_, err := gw.GatewayV1().GatewayClasses().UpdateStatus(ctx, class, metav1.UpdateOptions{})
	return ignoreNotFound(err)
}

func (c *controller) writeGateway(ctx context.Context, g *gatewayv1.Gateway, want *gatewayv1.GatewayStatus) error {
	st := g.Status.DeepCopy()
	st.Conditions = merged(st.Conditions, want.Conditions)
	st.Addresses = want.Addresses
	st.AttachedListenerSets = want.AttachedListenerSets
	var old map[gatewayv1.SectionName][]metav1.Condition
	st.Listeners, old = mergedListeners(st.Listeners, want.Listeners, func(l *gatewayv1.ListenerStatus) (gatewayv1.SectionName, *[]metav1.Condition) {
		return l.Name, &l.Conditions
	})
	if equality.Semantic.DeepEqual(*st, g.Status) {
		return nil
	}
	tell(c.recorder, g, "", g.Status.Conditions, st.Conditions)
	for _, l := range st.Listeners {
		tell(c.recorder, g, "listener "+string(l.Name), old[l.Name], l.Conditions)
	}
	g = g.DeepCopy()
	g.Status = *st
	_, err := c.gw.GatewayV1().Gateways(g.Namespace).UpdateStatus(ctx, g, metav1.UpdateOptions{})
	return ignoreNotFound(err)
}

// writeListenerSet writes ls's status as want says, when it differs.
func (c *controller) writeListenerSet(ctx context.Context, ls *gatewayv1.ListenerSet, want *gatewayv1.ListenerSetStatus) error {
	st := ls.Status.DeepCopy()
	st.Conditions = merged(st.Conditions, want.Conditions)
	var old map[gatewayv1.SectionName][]metav1.Condition
	st.Listeners, old = mergedListeners(st.Listeners, want.Listeners, func(l *gatewayv1.ListenerEntryStatus) (gatewayv1.SectionName, *[]metav1.Condition) {
		return l.Name, &l.Conditions
	})
	if equality.Semantic.DeepEqual(*st, ls.Status) {
		return nil
	}
	tell(c.recorder, ls, "", ls.Status.Conditions, st.Conditions)
	for _, l := range st.Listeners {
		tell(c.recorder, ls, "listener "+string(l.Name), old[l.Name], l.Conditions)
	}
	ls = ls.DeepCopy()
	ls.Status = *st
	_, err := c.gw.GatewayV1().ListenerSets(ls.Namespace).UpdateStatus(ctx, ls, metav1.UpdateOptions{})
	return ignoreNotFound(err)
}

// mergedListeners are want's listener statuses, their conditions merged
// with have's of the same name (their transition times kept), and have's
// conditions by name.
func mergedListeners[T any](have, want []T, fields func(*T) (gatewayv1.SectionName, *[]metav1.Condition)) ([]T, map[gatewayv1.SectionName][]metav1.Condition) {
	old := map[gatewayv1.SectionName][]metav1.Condition{}
	for i := range have {
		name, conds := fields(&have[i])
		old[name] = *conds
	}
	var out []T
	for _, l := range want {
		name, conds := fields(&l)
		*conds = merged(old[name], *conds)
		out = append(out, l)
	}
	return out, old
}

// writeRoutes writes, with update, the status of each route of kind
// whose parents' statuses of kubeboot's controller differ from m's;
// status is a route's.
func writeRoutes[R interface {
	metav1.Object
	runtime.Object
}](ctx context.Context, recorder record.EventRecorder, m *model, kind gatewayv1.Kind, routes []R, status func(R) *gatewayv1.RouteStatus, update func(context.Context, R) error) []error {
	var errs []error
	for _, r := range routes {
		parents, changed := parentStatuses(*status(r), m.routes[routeKey{kind, nameOf(r)}])
		if !changed {
			continue
		}
		old := map[string][]metav1.Condition{}
		for _, p := range status(r).Parents {
			if p.ControllerName == ControllerName {
				old[parentKey(p.ParentRef)] = p.Conditions
			}
		}
		for _, p := range parents {
			if p.ControllerName == ControllerName {
				tell(recorder, r, "parent Gateway "+string(p.ParentRef.Name), old[parentKey(p.ParentRef)], p.Conditions)
			}
		}
		r = r.DeepCopyObject().(R)
		status(r).Parents = parents
		errs = append(errs, ignoreNotFound(update(ctx, r)))
	}
	return errs
}

// tell records a Warning event on obj for each problem conds say that
// old did not (what says which part of obj, "" the whole): Accepted or
// ResolvedRefs False, Conflicted True, with the condition's reason.
func tell(recorder record.EventRecorder, obj runtime.Object, what string, old, conds []metav1.Condition) {
	for _, c := range conds {
		problem := c.Status == metav1.ConditionFalse && (c.Type == string(gatewayv1.GatewayConditionAccepted) || c.Type == string(gatewayv1.ListenerConditionResolvedRefs)) ||
			c.Status == metav1.ConditionTrue && c.Type == string(gatewayv1.ListenerConditionConflicted)
		if !problem {
			continue
		}
		if o := meta.FindStatusCondition(old, c.Type); o != nil && o.Status == c.Status && o.Reason == c.Reason {
			continue
		}
		msg := c.Message
		if what != "" {
			msg = what + ": " + msg
		}
		recorder.Event(obj, corev1.EventTypeWarning, c.Reason, msg)
	}
}

// parentStatuses are a route's parents' statuses, st's, with kubeboot's
// controller's made want's (other controllers' left alone), and whether
// they differ from st's.
func parentStatuses(st gatewayv1.RouteStatus, want []gatewayv1.RouteParentStatus) ([]gatewayv1.RouteParentStatus, bool) {
	return ownStatuses(st.Parents, want, func(p *gatewayv1.RouteParentStatus) (gatewayv1.GatewayController, gatewayv1.ParentReference, *[]metav1.Condition) {
		return p.ControllerName, p.ParentRef, &p.Conditions
	})
}

// ancestorStatuses are parentStatuses of a policy's ancestors.
func ancestorStatuses(st gatewayv1.PolicyStatus, want []gatewayv1.PolicyAncestorStatus) ([]gatewayv1.PolicyAncestorStatus, bool) {
	return ownStatuses(st.Ancestors, want, func(p *gatewayv1.PolicyAncestorStatus) (gatewayv1.GatewayController, gatewayv1.ParentReference, *[]metav1.Condition) {
		return p.ControllerName, p.AncestorRef, &p.Conditions
	})
}

// ownStatuses are the entries of a status list (a route's parents, a
// policy's ancestors) with kubeboot's controller's made want's, their
// conditions' transition times kept, and whether they differ from have.
func ownStatuses[T any](have, want []T, fields func(*T) (gatewayv1.GatewayController, gatewayv1.ParentReference, *[]metav1.Condition)) ([]T, bool) {
	var out []T
	old := map[string][]metav1.Condition{}
	for _, p := range have {
		controller, ref, conds := fields(&p)
		if controller != ControllerName {
			out = append(out, p)
		} else {
			old[parentKey(ref)] = *conds
		}
	}
	for _, p := range want {
		_, ref, conds := fields(&p)
		*conds = merged(old[parentKey(ref)], *conds)
		out = append(out, p)
	}
	changed := !equality.Semantic.DeepEqual(out, have) && (len(out) > 0 || len(have) > 0)
	return out, changed
}

// writePolicies writes the status of each BackendTLSPolicy whose
// ancestors' statuses of kubeboot's controller differ from m's.
func (c *controller) writePolicies(ctx context.Context, m *model, policies []*gatewayv1.BackendTLSPolicy) []error {
	want := map[types.NamespacedName][]gatewayv1.PolicyAncestorStatus{}
	for _, p := range m.policies.all {
		want[nameOf(p.policy)] = p.status()
	}
	var errs []error
	for _, p := range policies {
		ancestors, changed := ancestorStatuses(p.Status, want[nameOf(p)])
		if !changed {
			continue
		}
		p = p.DeepCopy()
		p.Status.Ancestors = ancestors
		_, err := c.gw.GatewayV1().BackendTLSPolicies(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		errs = append(errs, ignoreNotFound(err))
	}
	return errs
}

// nameOf is o's namespace and name.
func nameOf(o metav1.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
}

// parentKey names a parentRef.
func parentKey(p gatewayv1.ParentReference) string {
	key := fmt.Sprint(deref(p.Group), "/", deref(p.Kind), "/", deref(p.Namespace), "/", p.Name, "/", deref(p.SectionName))
	if p.Port != nil {
		key += ":" + strconv.Itoa(int(*p.Port))
	}
	return key
}

func deref[T any](p *T) any {
	if p == nil {
		return ""
	}
	return *p
}

// supportedFeatures are the Gateway API features the nodes serve, which
// kubeboot's GatewayClass says (and the Gateway API's conformance suite
// takes as the ones to test): the core ones, and each extended one the
// suite passes (docs/conformance.md); static addresses with a range of
// the Gateways' own, and the experimental channel's fields where its CRDs
// are installed (the standard channel's would prune them).
func supportedFeatures(opts Options) []gatewayv1.SupportedFeature {
	names := []string{"Gateway", "HTTPRoute", "GRPCRoute", "TLSRoute", "ReferenceGrant",
		"GatewayPort8080", "GatewayHTTPListenerIsolation",
		"HTTPRoute303RedirectStatusCode", "HTTPRoute307RedirectStatusCode", "HTTPRoute308RedirectStatusCode",
		"HTTPRouteHostRewrite", "HTTPRoutePathRewrite", "HTTPRoutePathRedirect", "HTTPRouteSchemeRedirect", "HTTPRoutePortRedirect",
		"HTTPRouteMethodMatching", "HTTPRouteQueryParamMatching", "HTTPRouteResponseHeaderModification",
		"HTTPRouteParentRefPort", "HTTPRouteDestinationPortMatching", "HTTPRouteNamedRouteRule", "HTTPRouteBackendProtocolWebSocket",
		"HTTPRouteBackendProtocolH2C", "GRPCRouteNamedRouteRule",
		"HTTPRouteRequestTimeout", "HTTPRouteBackendTimeout", "HTTPRouteBackendRequestHeaderModification",
		"HTTPRouteRequestMirror", "HTTPRouteRequestMultipleMirrors", "HTTPRouteRequestPercentageMirror", "HTTPRouteCORS",
		"GatewayHTTPSListenerDetectMisdirectedRequests",
		"BackendTLSPolicy", "BackendTLSPolicySANValidation", "GatewayBackendClientCertificate",
		"GatewayFrontendClientCertificateValidation", "GatewayFrontendClientCertificateValidationInsecureFallback", "ListenerSet",
		"TLSRouteModeTerminate", "TLSRouteModeMixed"}
	if opts.Addresses != nil {
		names = append(names, "GatewayStaticAddresses", "GatewayAddressEmpty")
	}
	if opts.Channel == ChannelExperimental {
		names = append(names, "HTTPRouteRetry")
	}
	out := make([]gatewayv1.SupportedFeature, 0, len(names))
	for _, n := range names {
		out = append(out, gatewayv1.SupportedFeature{Name: gatewayv1.FeatureName(n)})
	}
	slices.SortFunc(out, func(a, b gatewayv1.SupportedFeature) int { return strings.Compare(string(a.Name), string(b.Name)) })
	return out
}

// updateClassStatus says the GatewayClass is accepted, at install.
func updateClassStatus(ctx context.Context, gw gatewayclient.Interface, class *gatewayv1.GatewayClass, opts Options) error {
	m := build(&snapshot{classes: []*gatewayv1.GatewayClass{class}})
	return writeClass(ctx, gw, class, m.classes[class.Name], supportedFeatures(opts))
}

func joinErrors(errs []error) error {
	errs = slices.DeleteFunc(errs, func(e error) bool { return e == nil })
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%d status writes failed, the first: %w", len(errs), errs[0])
}
