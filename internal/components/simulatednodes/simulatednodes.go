// Package simulatednodes runs simulated nodes inside kubeboot's process
// (`kubeboot server --simulated-nodes=N`): Node objects with capacity and
// labels, kept Ready by heartbeats through node leases, whose bound Pods
// get IPs from the node's pod CIDR, run, become Ready, finish (Job Pods
// succeed) and are removed when deleted, as on a kubelet, without
// containers. The work is kwok's (sigs.k8s.io/kwok): its controllers,
// and its own stages (node initialize and heartbeat with lease, pod ready,
// complete and delete) that say how a node and a Pod move on.
//
// A node made to fail: annotate it kwok.x-k8s.io/status=custom and its
// status is left as the user sets it (Ready False, say), as in kwok; the
// node lifecycle controller then taints it and evicts its Pods.
package simulatednodes

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
	kubeletapis "k8s.io/kubelet/pkg/apis"
	nodeutil "k8s.io/kubernetes/pkg/util/node"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	kwokclient "sigs.k8s.io/kwok/pkg/client/clientset/versioned"
	kwokconfig "sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/kwok/controllers"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
	kwokcel "sigs.k8s.io/kwok/pkg/utils/cel"
	"sigs.k8s.io/kwok/pkg/utils/gotpl"

	"github.com/kubeboot/kubeboot/internal/platform/progress"
	"github.com/kubeboot/kubeboot/internal/platform/sharedobjects"
	"github.com/kubeboot/kubeboot/internal/platform/simulated"
	"github.com/kubeboot/kubeboot/internal/platform/version"
)

// User is the user the simulated nodes act as; Access gives it its rights.
const User = "system:kubeboot:simulated-nodes"

// Labels and annotations of a simulated node.
const (
	// CustomStatusAnnotation=CustomStatusValue on a node or Pod leaves its
	// status to the user (kwok's --disregard-status-with-annotation-selector).
	CustomStatusAnnotation = "kwok.x-k8s.io/status"
	CustomStatusValue      = "custom"
	// NamePrefix starts a simulated node's name; its index follows.
	NamePrefix = "simulated-"
)

// NodeName is the name of the simulated node i.
func NodeName(i int) string { return NamePrefix + strconv.Itoa(i) }

// nodeAddresses is where the simulated nodes' InternalIPs come from, in
// name order: 198.18.0.0/15, the range set aside for benchmarking
// (RFC 2544), which no real network routes.
var nodeAddresses = netip.MustParsePrefix("198.18.0.0/15")

// Capacity of each simulated node.
var capacity = corev1.ResourceList{
	corev1.ResourceCPU:              resource.MustParse("32"),
	corev1.ResourceMemory:           resource.MustParse("256Gi"),
	corev1.ResourcePods:             resource.MustParse("110"),
	corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
}

// Run keeps o.Count simulated nodes until ctx is done, acting through
// client (as User, with Access's rights). The Nodes and Pods kwok watches
// are shared through pool (pooledClient). ipam is kube-controller-manager's
// node IPAM, nil when it allocates no pod CIDRs. How many nodes
// are created, then Ready, goes to report (thousands take seconds); ready
// is called once every node is Ready. It returns nil once ctx is done, or
// the error that kept the nodes from starting.
func Run(ctx context.Context, o *Options, client *rest.Config, pool *sharedobjects.Pool, ipam *NodeIPAM, report progress.Func, ready func()) error {
	began := time.Now()
	logger := klog.FromContext(ctx).WithName("simulated-nodes")
	ctx = klog.NewContext(ctx, logger)
	typed, err := kubernetes.NewForConfig(client)
	if err != nil {
		return err
	}
	plan, err := o.plan(ipam)
	if err != nil {
		return err
	}
	if err := ensureNodes(ctx, typed, o.Count, plan, report); err != nil {
		return err
	}
	c, err := newController(ctx, o, client, typed, pool, plan)
	if err != nil {
		return err
	}
	// kwok logs through its own logger (log/slog): its warnings and
	// errors go where the server's logs go.
	ctx = kwoklog.NewContext(ctx, kwoklog.NewLogger(kwokLog{logger: logger.WithName("kwok")}, kwoklog.LevelWarn))
	if err := c.Start(ctx); err != nil {
		return err
	}
	// kwok skips a Pod bound to a node it does not play yet, and may miss
	// it again when it starts playing the node (its pod and node workers
	// race), so Pods are best bound to Ready nodes: say when they are.
	if err := waitReady(ctx, typed, o.Count, readyStall, report); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	logger.Info("Simulated nodes are ready", "count", o.Count, "took", time.Since(began).Round(time.Millisecond))
	ready()
	<-ctx.Done()
	return nil
}

// readyStall bounds how long the nodes may go without one more of them
// becoming Ready: thousands take minutes on a busy machine, but a wait
// that makes no progress has failed.
const readyStall = 2 * time.Minute

// waitReady waits until the simulated nodes 0 ... count-1 are Ready,
// reporting how many are. It fails once stall passes without a node more
// Ready. It watches the nodes rather than listing them again and again:
// a list of 5,000 nodes is ~18 MB of JSON to encode and decode, and with
// a list every 50 ms 5,000 nodes took 5 min 24 s to be Ready instead of
// 2 min 14 s (docs/performance.md).
func waitReady(ctx context.Context, client kubernetes.Interface, count int, stall time.Duration, report progress.Func) error {
	selector := simulated.NodeSelector()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return client.CoreV1().Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return client.CoreV1().Nodes().Watch(ctx, o)
		},
	}
	update := progress.Update{Step: "simulated nodes Ready", Total: int64(count)}
	defer func() { update.End = true; report.Report(update) }()

	waitCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var readyCount atomic.Int64
	var progressed atomic.Int64 // Unix nanoseconds
	progressed.Store(time.Now().UnixNano())
	go func() {
		tick := time.NewTicker(min(stall/4, time.Second))
		defer tick.Stop()
		for {
			select {
			case <-waitCtx.Done():
				return
			case <-tick.C:
				if stalled := time.Since(time.Unix(0, progressed.Load())); stalled > stall {
					cancel(fmt.Errorf("%d of %d nodes Ready, none more for %s", readyCount.Load(), count, stalled.Round(time.Second)))
					return
				}
			}
		}
	}()

	ready := map[string]bool{}
	// As generated informers do: a client that cannot stream the initial
	// list in a watch (a fake) is listed.
	_, err := watchtools.UntilWithSync(waitCtx, cache.ToListWatcherWithWatchListSemantics(lw, client), &corev1.Node{}, nil, func(e watch.Event) (bool, error) {
		n, ok := e.Object.(*corev1.Node)
		if !ok || !strings.HasPrefix(n.Name, NamePrefix) {
			return false, nil
		}
		was := len(ready)
		if e.Type != watch.Deleted && nodeutil.IsNodeReady(n) {
			ready[n.Name] = true
		} else {
			delete(ready, n.Name)
		}
		if len(ready) > was {
			progressed.Store(time.Now().UnixNano())
		}
		readyCount.Store(int64(len(ready)))
		update.Done = int64(len(ready))
		report.Report(update)
		return len(ready) >= count, nil
	})
	if err != nil && ctx.Err() == nil {
		if cause := context.Cause(waitCtx); cause != nil && cause != context.Canceled {
			return cause
		}
	}
	return err
}

// newController is kwok's controller for the simulated nodes, with
// kwok's own stages, its watches' objects shared through pool.
func newController(ctx context.Context, o *Options, client *rest.Config, typed kubernetes.Interface, pool *sharedobjects.Pool, plan cidrPlan) (*controllers.Controller, error) {
	dyn, err := dynamic.NewForConfig(client)
	if err != nil {
		return nil, err
	}
	kwok, err := kwokclient.NewForConfig(client)
	if err != nil {
		return nil, err
	}
	stages, err := stages(o)
	if err != nil {
		return nil, err
	}
	id, err := controllers.Identity()
	if err != nil {
		return nil, err
	}
	return controllers.NewController(controllers.Config{
		Clock:         clock.RealClock{},
		TypedClient:   pooledClient{Interface: typed, pool: pool},
		DynamicClient: dyn,
		// For the schemas of stages on other resources; these are on
		// nodes and Pods only.
		RESTClient:                            typed.Discovery().RESTClient(),
		RESTMapper:                            restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(typed.Discovery())),
		TypedKwokClient:                       kwok,
		ManageNodesWithAnnotationSelector:     simulated.NodeAnnotation + "=" + simulated.NodeAnnotationValue,
		DisregardStatusWithAnnotationSelector: CustomStatusAnnotation + "=" + CustomStatusValue,
		// Pods on a node without a pod CIDR get IPs from the first node
		// CIDR's range.
		CIDR:                      plan.node(0)[0],
		LocalStages:               stages,
		PodPlayStageParallelism:   workers(podStartRate, 16),
		NodePlayStageParallelism:  workers(float64(o.Count)/nodeStatusReportFrequency.Seconds(), 4),
		NodeLeaseParallelism:      workers(float64(o.Count)/(o.LeaseDuration/4).Seconds(), 8),
		NodeLeaseDurationSeconds:  uint(o.LeaseDuration.Seconds()),
		PodsOnNodeSyncParallelism: 4,
		ID:                        id,
		FuncMap:                   gotpl.FuncMap{"PodIPsWith": newPodIPs(ctx, typed).with},
	})
}

// kwok's worker pools are sized for the simulated kubelets to keep the
// pace of real ones, each of which renews its lease and reports its Pods
// on its own: a pool of W workers whose requests take L each carries at
// most W/L a second. Each pool carries its load at up to
// requestLatencyBudget a request: the nodes' lease renewals (a quarter of
// the lease duration apart, as the kubelet's), their status reports, and
// podStartRate Pod starts. With kwok's fixed pools (8 lease workers), at
// 5,000 nodes with 150,000 Pods coming up a lease update took 96 ms and
// kwok renewed 100 leases a second of the 500 due: leases expired, the
// node lifecycle controller marked nodes unreachable and their Pods not
// Ready, and kwok played pod-ready again for each (docs/performance.md).
const requestLatencyBudget = 500 * time.Millisecond

// podStartRate is how many Pods a second the simulated kubelets start at
// full pace: as many as kube-controller-manager creates at its in-process
// client limit (kubecontrollermanager.InProcessQPS).
const podStartRate = 200

// workers is the size of a pool that carries perSecond requests at
// requestLatencyBudget each, and at least least.
func workers(perSecond float64, least int) uint {
	return uint(max(least, int(math.Ceil(perSecond*requestLatencyBudget.Seconds()))))
}

// kwokStages are kwok's default stages as kwok ships them (YAML): those
// of kwokctl's clusters.
var kwokStages = []string{nodefast.DefaultNodeInit, nodeheartbeat.DefaultNodeHeartbeatWithLease,
	podfast.DefaultPodReady, podfast.DefaultPodComplete, podfast.DefaultPodDelete}

// stages are kwok's default stages, as kwokctl's clusters run them (their
// selectors in CEL: selectInCEL): a node initializes to Ready (reporting no kube-proxy version, as 1.37's
// kubelets) and heartbeats through its lease, its status reported as often
// as the kubelet's; a Pod becomes Ready (after o.PodStartupDelay; without
// one, with its binding's time: podReadyAtBinding), completes when its
// restartPolicy says it may (and is then no longer Ready), and is removed
// once deleted.
func stages(o *Options) (map[internalversion.StageResourceRef][]*internalversion.Stage, error) {
	byRef := map[internalversion.StageResourceRef][]*internalversion.Stage{}
	for _, raw := range kwokStages {
		s, err := kwokconfig.UnmarshalWithType[*internalversion.Stage](raw)
		if err != nil {
			return nil, fmt.Errorf("kwok stage: %w", err)
		}
		if err := selectInCEL(s); err != nil {
			return nil, err
		}
		switch {
		case s.Name == "node-initialize":
			if err := editStatus(s, kwokKubeProxyVersion, noKubeProxyVersion); err != nil {
				return nil, err
			}
		case s.Name == "node-heartbeat-with-lease":
			s.Spec.Delay = &internalversion.StageDelay{DurationMilliseconds: ptr.To(nodeStatusReportFrequency.Milliseconds()),
				JitterDurationMilliseconds: ptr.To((nodeStatusReportFrequency + nodeStatusUpdateFrequency).Milliseconds())}
		case s.Name == "pod-ready" && o.PodStartupDelay > 0:
			ms := o.PodStartupDelay.Milliseconds()
			s.Spec.Delay = &internalversion.StageDelay{DurationMilliseconds: &ms}
		case s.Name == "pod-ready":
			if err := editStatus(s, kwokPodReadyNow, podReadyAtBinding); err != nil {
				return nil, err
			}
		case s.Name == "pod-complete":
			if err := editStatus(s, "", completedConditions); err != nil {
				return nil, err
			}
		}
		byRef[s.Spec.ResourceRef] = append(byRef[s.Spec.ResourceRef], s)
	}
	return byRef, nil
}

// A simulated node reports its status as often as the kubelet by default:
// every nodeStatusReportFrequency, within a nodeStatusUpdateFrequency of
// it (the kubelet checks every nodeStatusUpdateFrequency whether its status
// changed or is due). kwok's heartbeat stage reports every 10 to 20
// minutes; its lease is renewed every quarter of LeaseDuration, as the
// kubelet's.
const (
	nodeStatusReportFrequency = 5 * time.Minute
	nodeStatusUpdateFrequency = 10 * time.Second
)

// completedConditions end kwok's pod-complete status: a Pod that has
// finished is no longer Ready, as the kubelet reports it (reason
// PodCompleted). kwok's stage leaves the Ready conditions pod-ready set,
// so a Succeeded Pod would stay Ready. The status is a strategic merge
// patch, which merges conditions by type.
const completedConditions = `
conditions:
- type: Ready
  status: "False"
  reason: PodCompleted
  lastTransitionTime: {{ Now | Quote }}
- type: ContainersReady
  status: "False"
  reason: PodCompleted
  lastTransitionTime: {{ Now | Quote }}
`

// A Pod without a startup delay starts when it is bound: pod-ready's
// times (startTime, the containers' startedAt, its conditions'
// lastTransitionTime) are the PodScheduled condition's, the binding's,
// rather than the time kwok plays the stage. Under load kwok plays
// pod-ready again for many Pods, on a copy from before its first status
// write (a Pod watch the API server cut off as too slow, relisted while
// kwok's queue lags seconds behind): 20-56% more status patches at 200
// nodes / 6,000 Pods (docs/performance.md). With kwok's time each
// replay moved those times and was a write, with a watch event for every
// Pod watcher; with the binding's, a replay patches the status it already
// has, which the API server does not write. A Pod bound without the
// scheduler (spec.nodeName set at create) has no PodScheduled condition
// and keeps kwok's time.
const (
	kwokPodReadyNow   = "{{ $now := Now }}"
	podReadyAtBinding = `{{ $now := Now }}{{ range .status.conditions }}{{ if eq .type "PodScheduled" }}{{ $now = .lastTransitionTime }}{{ end }}{{ end }}`
)

// kwok's node-initialize stage reports its own version as the node's
// kube-proxy's; kubelets have left the field empty since 1.31 (it is
// deprecated: a kubelet cannot know its node's kube-proxy).
const (
	kwokKubeProxyVersion = "kubeProxyVersion: {{ or $nodeInfo.kubeProxyVersion $kwokVersion }}"
	noKubeProxyVersion   = "kubeProxyVersion: {{ or $nodeInfo.kubeProxyVersion `\"\"` }}"
)

// jqSelector is one of kwok's JQ selector expressions.
type jqSelector struct {
	key, operator, values string
}

// celSelectors are kwok's default stages' selector expressions, each as
// CEL on the typed object. kwok matches every event of its Nodes and Pods
// against every stage of the kind; a JQ expression is evaluated on the
// object turned into JSON and back into maps (a round trip of the whole
// object for each event), a CEL one on the object itself.
var celSelectors = map[jqSelector]string{
	{".metadata.deletionTimestamp", "DoesNotExist", ""}:                               "!has(self.metadata.deletionTimestamp)",
	{".metadata.deletionTimestamp", "Exists", ""}:                                     "has(self.metadata.deletionTimestamp)",
	{".status.phase", "In", "Pending"}:                                                `self.status.phase == "Pending"`,
	{".status.phase", "In", "Running"}:                                                `self.status.phase == "Running"`,
	{`.status.conditions.[] | select( .type == "Ready" ) | .status`, "In", "True"}:    `self.status.conditions.exists(c, c.type == "Ready" && c.status == "True")`,
	{`.status.conditions.[] | select( .type == "Ready" ) | .status`, "NotIn", "True"}: `!self.status.conditions.exists(c, c.type == "Ready" && c.status == "True")`,
	{".metadata.ownerReferences.[].kind", "In", "Job"}:                                `self.metadata.ownerReferences.exists(r, r.kind == "Job")`,
}

// celTypes are the types celSelectors read beyond kwok's CEL environment's
// (kwokcel.DefaultTypes, which each stage's environment is made of): the
// elements of the lists they look into.
var celTypes = []any{corev1.PodCondition{}, corev1.NodeCondition{}, metav1.OwnerReference{}}

// addCELTypes adds celTypes to kwok's CEL environment, once.
var addCELTypes = sync.OnceFunc(func() {
	kwokcel.DefaultTypes = append(kwokcel.DefaultTypes, celTypes...)
})

// selectInCEL replaces each JQ selector expression of stage s by its CEL
// (celSelectors); it fails on one it does not know, so that a kwok whose
// stages changed is noticed.
func selectInCEL(s *internalversion.Stage) error {
	addCELTypes()
	if s.Spec.Selector == nil {
		return nil
	}
	for i, e := range s.Spec.Selector.MatchExpressions {
		if e.JQ == nil {
			continue
		}
		cel, ok := celSelectors[jqSelector{e.JQ.Key, string(e.JQ.Operator), strings.Join(e.JQ.Values, ",")}]
		if !ok {
			return fmt.Errorf("kwok stage %s: no CEL for its selector %s %s %v", s.Name, e.JQ.Key, e.JQ.Operator, e.JQ.Values)
		}
		s.Spec.Selector.MatchExpressions[i] = internalversion.MatchExpression{CEL: &internalversion.ExpressionCEL{Expression: cel}}
	}
	return nil
}

// editStatus changes the status template of stage s: the line old becomes
// new, or with old empty, new is added at the end. It fails if the stage
// has no status template or the template no line old, so that a kwok
// whose stages changed is noticed.
func editStatus(s *internalversion.Stage, old, new string) error {
	for _, step := range s.Spec.Steps {
		p := step.Patch
		if p == nil || p.Subresource != "status" || p.Root != "status" {
			continue
		}
		switch {
		case old == "":
			p.Template += new
		case strings.Contains(p.Template, old):
			p.Template = strings.Replace(p.Template, old, new, 1)
		default:
			return fmt.Errorf("kwok stage %s: no %q in its status template", s.Name, old)
		}
		return nil
	}
	return fmt.Errorf("kwok stage %s: no status patch to edit", s.Name)
}

// ensureNodes creates the simulated nodes that do not exist, with their
// pod CIDRs from plan, and deletes those beyond count, reporting how many
// it has created.
func ensureNodes(ctx context.Context, client kubernetes.Interface, count int, plan cidrPlan, report progress.Func) error {
	existing, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{
		LabelSelector: simulated.NodeSelector()})
	if err != nil {
		return err
	}
	have := map[string]bool{}
	var stale []string
	for _, n := range existing.Items {
		i, err := strconv.Atoi(strings.TrimPrefix(n.Name, NamePrefix))
		switch {
		case !strings.HasPrefix(n.Name, NamePrefix) || err != nil:
			// Someone else's kwok node.
		case i >= count:
			stale = append(stale, n.Name)
		default:
			have[n.Name] = true
		}
	}
	var g errgroup.Group
	g.SetLimit(16)
	missing := int64(count - len(have))
	var created atomic.Int64
	defer func() {
		report.Report(progress.Update{Step: "creating simulated nodes", Done: created.Load(), Total: missing, End: true})
	}()
	for i := range count {
		if have[NodeName(i)] {
			continue
		}
		node := newNode(i, plan.node(i))
		g.Go(func() error {
			_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
			if err == nil {
				report.Report(progress.Update{Step: "creating simulated nodes", Done: created.Add(1), Total: missing})
			}
			return err
		})
	}
	for _, name := range stale {
		g.Go(func() error {
			err := client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	}
	return g.Wait()
}

// newNode is the simulated node i as a kubelet registers it: its labels
// (the beta OS and architecture ones too, which the node lifecycle
// controller would otherwise add), pod CIDRs, address, capacity and node
// info; kwok's node-initialize stage then makes it Ready. No conditions
// yet: with Ready False, the node lifecycle controller, whose view of a
// node's health is renewed only every --node-monitor-period, would mark
// the Pods bound in the meantime not Ready, which kwok never undoes.
func newNode(i int, podCIDRs []string) *corev1.Node {
	name := NodeName(i)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
				kubeletapis.LabelOS: "linux", kubeletapis.LabelArch: "amd64",
				simulated.TypeLabel: simulated.TypeValue,
			},
			Annotations: map[string]string{simulated.NodeAnnotation: simulated.NodeAnnotationValue},
		},
		Spec: corev1.NodeSpec{PodCIDR: podCIDRs[0], PodCIDRs: podCIDRs},
		Status: corev1.NodeStatus{
			Capacity:    capacity.DeepCopy(),
			Allocatable: capacity.DeepCopy(),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: nthAddr(nodeAddresses.Addr(), uint32(i)+1).String()},
				{Type: corev1.NodeHostName, Address: name},
			},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion:          version.Get().GitVersion,
				ContainerRuntimeVersion: "simulated://" + version.Kubeboot,
				KernelVersion:           "simulated",
				OSImage:                 "kubeboot simulated node",
				OperatingSystem:         "linux",
				Architecture:            "amd64",
			},
		},
	}
	return node
}

// nthAddr is the IPv4 address n after a.
func nthAddr(a netip.Addr, n uint32) netip.Addr {
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) + n
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
