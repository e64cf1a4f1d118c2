//go:build linux

package networkpolicy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"
)

// Enforcer keeps the node's nftables table as the cluster's
// NetworkPolicies say for the node's Pods.
type Enforcer struct {
	node   Node
	nft    knftables.Interface
	synced chan struct{}
	// newNFT opens the table (knftables.New, or a fake in tests).
	newNFT func() (knftables.Interface, error)
}

// NewEnforcer returns an Enforcer for n.
func NewEnforcer(n Node) *Enforcer {
	if n.MinSyncInterval == 0 {
		n.MinSyncInterval = DefaultMinSyncInterval
	}
	if n.ResyncInterval == 0 {
		n.ResyncInterval = DefaultResyncInterval
	}
	return &Enforcer{node: n, synced: make(chan struct{}), newNFT: func() (knftables.Interface, error) {
		return knftables.New(knftables.InetFamily, TableName)
	}}
}

// Synced is closed once the first ruleset is in place, or once the node
// has found it cannot enforce policies: the node starts its Pods after
// it, so that none runs unprotected for a moment.
func (e *Enforcer) Synced() <-chan struct{} { return e.synced }

// Run enforces the policies until ctx is done: it opens the node's table,
// watches the node's view of the cluster (watch) and writes the ruleset
// at every change that matters (enforce), reporting on the Node (its
// condition and Events) and on policies it cannot read. A node whose
// kernel or nft cannot hold the table says so in one line and in its
// Node's condition, and runs on without enforcing: it does not stop the
// node.
func (e *Enforcer) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("networkpolicy")
	ctx = klog.NewContext(ctx, logger)
	r := e.startReporter(ctx)
	defer r.stop()

	nft, err := e.newNFT()
	if err != nil {
		logger.Error(err, "NetworkPolicy is NOT enforced on this node: nftables is not usable (kernel nf_tables, and the nft command)")
		r.warn(ReasonNFTUnavailable, "NetworkPolicy is not enforced on this node: "+err.Error())
		r.condition(condition(corev1.ConditionTrue, ReasonNFTUnavailable, err.Error()))
		close(e.synced)
		<-ctx.Done()
		return nil
	}
	e.nft = nft

	v, err := e.watch(ctx)
	if err != nil {
		return err
	}
	defer v.stop()
	return e.enforce(ctx, v, r)
}

// view is the node's view of what its ruleset reads, kept by informers:
// the Pods, Namespaces and NetworkPolicies, and the cluster DNS's own
// EndpointSlices (clusterdns.go). changed gets a token at each change that
// matters.
type view struct {
	pods       corelisters.PodLister
	namespaces corelisters.NamespaceLister
	policies   networkinglisters.NetworkPolicyLister
	dnsSlices  discoverylisters.EndpointSliceLister
	changed    chan struct{}
	stop       func()
}

// watch starts the view's informers and waits for their first lists.
func (e *Enforcer) watch(ctx context.Context) (*view, error) {
	factory := informers.NewSharedInformerFactory(e.node.Client, 0)
	dnsFactory := informers.NewSharedInformerFactoryWithOptions(e.node.Client, 0, informers.WithNamespace(metav1.NamespaceSystem),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = discoveryv1.LabelServiceName + "=" + dnsService }))
	pods, namespaces := factory.Core().V1().Pods(), factory.Core().V1().Namespaces()
	policies, dnsSlices := factory.Networking().V1().NetworkPolicies(), dnsFactory.Discovery().V1().EndpointSlices()
	v := &view{pods: pods.Lister(), namespaces: namespaces.Lister(), policies: policies.Lister(), dnsSlices: dnsSlices.Lister(),
		changed: make(chan struct{}, 1)}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { v.trigger() },
		UpdateFunc: func(old, new any) {
			if matters(old, new) {
				v.trigger()
			}
		},
		DeleteFunc: func(any) { v.trigger() },
	}
	for _, inf := range []cache.SharedIndexInformer{pods.Informer(), namespaces.Informer(), policies.Informer(), dnsSlices.Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, err
		}
	}
	v.stop = func() { factory.Shutdown(); dnsFactory.Shutdown() }
	for _, f := range []informers.SharedInformerFactory{factory, dnsFactory} {
		f.StartWithContext(ctx)
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok && ctx.Err() == nil {
				v.stop()
				return nil, fmt.Errorf("the %v informer did not sync", typ)
			}
		}
	}
	return v, nil
}

// trigger notes a change; changes not yet taken count as one.
func (v *view) trigger() {
	select {
	case v.changed <- struct{}{}:
	default:
	}
}

// state is the view now: what changed until now is in the listers, so the
// ruleset written next has it.
func (v *view) state(node string) state {
	select {
	case <-v.changed:
	default:
	}
	s := state{node: node}
	s.pods, _ = v.pods.List(labels.Everything())
	s.namespaces, _ = v.namespaces.List(labels.Everything())
	s.policies, _ = v.policies.List(labels.Everything())
	s.dnsSlices, _ = v.dnsSlices.List(labels.Everything())
	return s
}

// enforce writes the ruleset of the view, again at each change, at most
// once per MinSyncInterval (what changes in between is written together),
// and retries a failed write with backoff, until ctx is done.
func (e *Enforcer) enforce(ctx context.Context, v *view, r *reporter) error {
	newBackoff := func() wait.Backoff {
		return wait.Backoff{Duration: e.node.MinSyncInterval, Factor: 2, Steps: 1 << 30, Cap: maxRetryInterval}
	}
	backoff := newBackoff()
	resync := time.NewTicker(e.node.ResyncInterval)
	defer resync.Stop()
	var synced sync.Once
	for {
		start := time.Now()
		err := e.sync(ctx, v.state(e.node.Name), r)
		if ctx.Err() != nil {
			return nil
		}
		retry := time.Duration(0)
		if err != nil {
			retry = backoff.Step()
		} else {
			backoff = newBackoff()
			synced.Do(func() { close(e.synced) })
		}
		if wait := e.node.MinSyncInterval - time.Since(start); wait > retry {
			retry = wait
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
		if err == nil && !e.waitForChange(ctx, v.changed, resync.C) {
			return nil
		}
	}
}

// sync writes the ruleset of s in one transaction, all or nothing: when
// it fails the previous ruleset stays in place. It reports the outcome on
// the Node, and the policies it could not read.
func (e *Enforcer) sync(ctx context.Context, s state, r *reporter) error {
	start := time.Now()
	tx := e.nft.NewTransaction()
	invalid := ruleset(tx, s)
	err := e.nft.Run(ctx, tx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Writing the NetworkPolicy ruleset failed; the previous one stays and it is tried again")
		r.warn(ReasonSyncFailed, "Writing the NetworkPolicy ruleset failed: "+err.Error())
		r.condition(condition(corev1.ConditionTrue, ReasonSyncFailed, err.Error()))
		return err
	}
	klog.FromContext(ctx).V(2).Info("Wrote the NetworkPolicy ruleset", "policies", len(s.policies), "pods", len(s.pods), "elapsed", time.Since(start))
	// The reporter writes only a change of the condition.
	r.condition(condition(corev1.ConditionFalse, ReasonEnforced, "The node enforces its Pods' NetworkPolicies"))
	r.invalid(invalid, s.policies)
	return nil
}

// matters reports whether an update changes what the ruleset reads. Most
// of a Pod's updates are its kubelet's reports (conditions, containers'
// states), each of which would otherwise rewrite the whole table.
func matters(old, new any) bool {
	switch o := old.(type) {
	case *corev1.Pod:
		n, ok := new.(*corev1.Pod)
		return !ok || !maps.Equal(o.Labels, n.Labels) || o.Spec.NodeName != n.Spec.NodeName || o.Spec.HostNetwork != n.Spec.HostNetwork ||
			finished(o) != finished(n) || !slices.Equal(o.Status.PodIPs, n.Status.PodIPs) ||
			!slices.EqualFunc(o.Spec.Containers, n.Spec.Containers, func(a, b corev1.Container) bool { return slices.Equal(a.Ports, b.Ports) })
	case *corev1.Namespace:
		n, ok := new.(*corev1.Namespace)
		return !ok || !maps.Equal(o.Labels, n.Labels)
	case *networkingv1.NetworkPolicy:
		n, ok := new.(*networkingv1.NetworkPolicy)
		return !ok || !equality.Semantic.DeepEqual(o.Spec, n.Spec)
	case *discoveryv1.EndpointSlice:
		n, ok := new.(*discoveryv1.EndpointSlice)
		return !ok || !equality.Semantic.DeepEqual(o.Endpoints, n.Endpoints) || !equality.Semantic.DeepEqual(o.Ports, n.Ports)
	}
	return true
}

// waitForChange waits for a change of the cluster, or for the table to
// be found missing or short of a base chain at a resync (someone else
// deleted it), and reports whether to write the table; false: ctx is
// done. A table that stands is not rewritten: at 1,000 Pods a rewrite
// costs 0.6 s of CPU (performance.md).
func (e *Enforcer) waitForChange(ctx context.Context, changed <-chan struct{}, resync <-chan time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-changed:
			return true
		case <-resync:
			chains, err := e.nft.List(ctx, "chains")
			if err != nil || !slices.Contains(chains, forwardEgressChain) || !slices.Contains(chains, forwardIngressChain) ||
				!slices.Contains(chains, inputEgressChain) {
				klog.FromContext(ctx).Info("The NetworkPolicy table is missing or incomplete; writing it again", "chains", chains, "err", err)
				return true
			}
		}
	}
}

// reporter tells what the node's enforcer does: Events on the Node and
// on the policies it cannot read, and the Node's condition.
type reporter struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	node        *corev1.ObjectReference
	// conditions holds the latest condition, which reportConditions
	// writes to the Node.
	conditions chan corev1.NodeCondition
	// reported are the last unsupported message of each policy.
	reported map[string]string
}

// startReporter starts recording Events and writing the Node's condition,
// until ctx is done.
func (e *Enforcer) startReporter(ctx context.Context) *reporter {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: e.node.Client.CoreV1().Events("")})
	r := &reporter{
		broadcaster: broadcaster,
		recorder:    broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubeboot-network-policy", Host: e.node.Name}),
		node:        &corev1.ObjectReference{Kind: "Node", Name: e.node.Name, UID: types.UID(e.node.Name)},
		conditions:  make(chan corev1.NodeCondition, 1),
		reported:    map[string]string{},
	}
	go e.reportConditions(ctx, r.conditions)
	return r
}

func (r *reporter) stop() { r.broadcaster.Shutdown() }

// warn records a Warning Event on the Node.
func (r *reporter) warn(reason, message string) {
	r.recorder.Event(r.node, corev1.EventTypeWarning, reason, message)
}

// condition makes c the condition to write, replacing one not written
// yet.
func (r *reporter) condition(c corev1.NodeCondition) {
	select {
	case <-r.conditions:
	default:
	}
	r.conditions <- c
}

// invalid records an event on each policy whose part the dataplane could
// not read, once per message.
func (r *reporter) invalid(invalid []error, policies []*networkingv1.NetworkPolicy) {
	if len(invalid) == 0 {
		return
	}
	byName := map[string]*networkingv1.NetworkPolicy{}
	for _, np := range policies {
		byName[np.Namespace+"/"+np.Name] = np
	}
	for _, err := range invalid {
		var pe *policyError
		if !errors.As(err, &pe) {
			continue
		}
		np := byName[pe.policy]
		if np == nil || r.reported[pe.policy] == err.Error() {
			continue
		}
		r.reported[pe.policy] = err.Error()
		r.recorder.Event(np, corev1.EventTypeWarning, ReasonPolicyUnsupported,
			"Not enforced as written; the part that cannot be read allows nothing: "+err.Error())
	}
}

func condition(status corev1.ConditionStatus, reason, message string) corev1.NodeCondition {
	now := metav1.Now()
	return corev1.NodeCondition{Type: ConditionType, Status: status, Reason: reason, Message: message,
		LastTransitionTime: now, LastHeartbeatTime: now}
}

// reportConditions writes the latest condition to the Node's status,
// retrying until the Node exists (the kubelet registers it after the
// first ruleset is written) and the write succeeds.
func (e *Enforcer) reportConditions(ctx context.Context, conditions <-chan corev1.NodeCondition) {
	logger := klog.FromContext(ctx)
	var last corev1.NodeCondition
	for {
		var c corev1.NodeCondition
		select {
		case <-ctx.Done():
			return
		case c = <-conditions:
		}
		if c.Status == last.Status && c.Reason == last.Reason && c.Message == last.Message {
			continue
		}
		patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{c}}})
		if err != nil {
			logger.Error(err, "NetworkPolicy condition")
			continue
		}
		err = wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: time.Second, Factor: 2, Cap: maxRetryInterval, Steps: 1 << 30},
			func(ctx context.Context) (bool, error) {
				_, err := e.node.Client.CoreV1().Nodes().PatchStatus(ctx, e.node.Name, patch)
				if err != nil {
					logger.V(2).Info("Reporting the NetworkPolicy condition", "err", err)
				}
				return err == nil, nil
			})
		if err == nil {
			last = c
		}
	}
}

// policyError is a part of a policy the dataplane cannot read.
type policyError struct {
	policy string
	err    error
}

func (e *policyError) Error() string { return fmt.Sprintf("NetworkPolicy %s: %v", e.policy, e.err) }
func (e *policyError) Unwrap() error { return e.err }
