package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	kubeletstatus "k8s.io/kubernetes/pkg/kubelet/status"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/test/harness"
)

// The simulated nodes of TestSimulatedNodes, their pod CIDRs (a /24 each
// from --simulated-node-cidr, in name order) and their flags' values.
const (
	simulatedCount        = 3
	simulatedCIDR         = "10.200.4.0/22" // not on a /16 boundary: the nodes' /24s are 10.200.4-6.0/24
	simulatedLease        = 4 * time.Second // renewed every second
	simulatedStartupDelay = time.Second
	// simulatedFailing is the node the last check makes NotReady.
	simulatedFailing = "simulated-2"
)

// simulatedAddresses is the range the nodes' InternalIPs are from: RFC
// 2544's, which no real network routes.
var simulatedAddresses = netip.MustParsePrefix("198.18.0.0/15")

// TestSimulatedNodes runs `kubeboot server --simulated-nodes=3` and checks
// that the nodes are there, Ready, and run what the controllers and the
// scheduler put on them as kubelets would, without any kubelet (and
// without any packet leaving the machine: nothing here dials a node).
// The checks run in order, each in a namespace of its own; the last one
// makes a node fail.
func TestSimulatedNodes(t *testing.T) {
	srv, client := harness.StartLocalServer(t, fmt.Sprintf("--simulated-nodes=%d", simulatedCount),
		// The node lifecycle controller looks at the nodes every second
		// (5s by default), so that it taints the failed node at once.
		"--controller-manager-arg=--node-monitor-period=1s",
		"--allocate-node-cidrs=false", "--flannel-backend=none", "--simulated-node-cidr="+simulatedCIDR,
		fmt.Sprintf("--simulated-node-lease-duration=%s", simulatedLease),
		fmt.Sprintf("--simulated-pod-startup-delay=%s", simulatedStartupDelay),
		harness.FastMetricsArgs[0], harness.FastMetricsArgs[1],
		// The HPA of the metrics check acts every second, not every 15.
		"--controller-manager-arg=--horizontal-pod-autoscaler-sync-period=1s",
	)
	// metrics-server is published once the server is ready, after
	// startServer returns.
	metricsAvailable := watchMetricsAvailability(t, srv)
	// The nodes are created once the apiserver is ready, so after
	// startServer returns.
	harness.Eventually(t, 30*time.Second, fmt.Sprintf("%d simulated nodes Ready and without taints", simulatedCount),
		func(ctx context.Context) (bool, string) {
			nodes, err := simulatedNodes(ctx, client)
			if err != nil {
				return false, err.Error()
			}
			var state []string
			ok := len(nodes) == simulatedCount
			for _, n := range nodes {
				var taints []string
				for _, taint := range n.Spec.Taints {
					taints = append(taints, taint.ToString())
				}
				ready := nodeReady(&n)
				ok = ok && ready == corev1.ConditionTrue && len(taints) == 0
				state = append(state, fmt.Sprintf("%s: Ready %q, taints %q", n.Name, ready, taints))
			}
			return ok, fmt.Sprintf("%d nodes: %s", len(nodes), strings.Join(state, "; "))
		})

	t.Run("the nodes", func(t *testing.T) { checkSimulatedNodes(t, client) })
	t.Run("a Deployment rolls out", func(t *testing.T) { checkSimulatedDeployment(t, srv, client) })
	t.Run("a Job completes", func(t *testing.T) { checkSimulatedJob(t, client) })
	t.Run("a StatefulSet rolls out in order", func(t *testing.T) { checkSimulatedStatefulSet(t, client) })
	t.Run("a claim gets a local volume on its Pod's node", func(t *testing.T) { checkSimulatedLocalStorage(t, srv, client) })
	t.Run("no kubelet to reach", func(t *testing.T) { checkSimulatedNoKubelet(t, srv, client) })
	t.Run("resource metrics, and an HPA scaling on them", func(t *testing.T) { checkSimulatedResourceMetrics(t, srv, client) })
	t.Run("the resource metrics API was never unavailable", metricsAvailable)
	// Last: the failed node stays failed.
	t.Run("a failed node is tainted and its Pods evicted", func(t *testing.T) { checkSimulatedNodeFailure(t, client) })
}

// checkSimulatedNodes: simulated-0..2, labelled and annotated as kwok's
// nodes, report the server's version as their kubelet's (and no
// kube-proxy version), have distinct
// InternalIPs from 198.18.0.0/15, the pod CIDRs of --simulated-node-cidr
// in order, and leases of --simulated-node-lease-duration that they renew.
func checkSimulatedNodes(t *testing.T, client kubernetes.Interface) {
	ctx := context.Background()
	version, err := client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := simulatedNodes(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	addresses := map[string]string{} // InternalIP: node
	for i, want := range simulatedPodCIDRs(t) {
		name := fmt.Sprintf("simulated-%d", i)
		n, ok := nodes[name]
		if !ok {
			t.Errorf("no node %s among %v", name, slices.Sorted(maps.Keys(nodes)))
			continue
		}
		for k, v := range map[string]string{
			"type": "kwok", corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
		} {
			if got, ok := n.Labels[k]; !ok || got != v {
				t.Errorf("node %s: label %s=%q, want %q (labels %v)", name, k, got, v, n.Labels)
			}
		}
		if got := n.Annotations["kwok.x-k8s.io/node"]; got != "fake" {
			t.Errorf("node %s: annotation kwok.x-k8s.io/node=%q, want fake", name, got)
		}
		if got := n.Status.NodeInfo.KubeletVersion; got != version.GitVersion {
			t.Errorf("node %s: kubelet version %q, want the server's %q", name, got, version.GitVersion)
		}
		if got := n.Status.NodeInfo.KubeProxyVersion; got != "" {
			t.Errorf("node %s: kube-proxy version %q, want none, as 1.37's kubelets report", name, got)
		}
		var internal []string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				internal = append(internal, a.Address)
			}
		}
		if len(internal) != 1 {
			t.Errorf("node %s: InternalIPs %q, want one", name, internal)
		} else if ip, err := netip.ParseAddr(internal[0]); err != nil || !simulatedAddresses.Contains(ip) {
			t.Errorf("node %s: InternalIP %q, want one in %s", name, internal[0], simulatedAddresses)
		} else if other, dup := addresses[internal[0]]; dup {
			t.Errorf("nodes %s and %s: the same InternalIP %s", other, name, internal[0])
		} else {
			addresses[internal[0]] = name
		}
		if n.Spec.PodCIDR != want.String() || !slices.Equal(n.Spec.PodCIDRs, []string{want.String()}) {
			t.Errorf("node %s: podCIDR %q, podCIDRs %q, want %s (/24 number %d of --simulated-node-cidr=%s)",
				name, n.Spec.PodCIDR, n.Spec.PodCIDRs, want, i, simulatedCIDR)
		}
		if n.Spec.Unschedulable {
			t.Errorf("node %s: unschedulable", name)
		}
	}
	if len(nodes) != simulatedCount {
		t.Errorf("nodes labelled type=kwok: %v, want %d", slices.Sorted(maps.Keys(nodes)), simulatedCount)
	}

	// Leases of --simulated-node-lease-duration, renewed every quarter of
	// it.
	leases := client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	first := map[string]time.Time{}
	for name := range nodes {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("lease of node %s: %v", name, err)
			continue
		}
		if got := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); got != int32(simulatedLease/time.Second) {
			t.Errorf("lease of node %s: duration %ds, want %s", name, got, simulatedLease)
		}
		if ptr.Deref(l.Spec.HolderIdentity, "") == "" || l.Spec.RenewTime == nil {
			t.Errorf("lease of node %s: holder %v, renewed %v", name, l.Spec.HolderIdentity, l.Spec.RenewTime)
			continue
		}
		first[name] = l.Spec.RenewTime.Time
	}
	harness.Eventually(t, simulatedLease, "every node lease renewed within its duration", func(ctx context.Context) (bool, string) {
		var stale []string
		for name, renewed := range first {
			l, err := leases.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(renewed) {
				stale = append(stale, fmt.Sprintf("%s renewed %v", name, l.Spec.RenewTime))
			}
		}
		return len(stale) == 0, fmt.Sprintf("not renewed since: %q", stale)
	})
}

// checkSimulatedDeployment: `kubectl rollout status` of a Deployment of
// 4 replicas succeeds; its Pods are Running and Ready on simulated nodes,
// Ready no sooner than --simulated-pod-startup-delay after their creation,
// with distinct IPs from their nodes' pod CIDRs and their nodes' addresses
// as host IPs.
func checkSimulatedDeployment(t *testing.T, srv *harness.APIServer, client kubernetes.Interface) {
	const ns = "simulated-deployment"
	workNamespace(t, client, ns)
	ctx := context.Background()
	srv.Kubectl(t, "create", "deployment", "web", "-n", ns, "--image=nginx", "--replicas=4")
	start := time.Now()
	srv.Kubectl(t, "rollout", "status", "deployment/web", "-n", ns, "--timeout=60s")
	t.Logf("rolled out in %s", time.Since(start).Round(100*time.Millisecond))

	nodes, err := simulatedNodes(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := podsOf(ctx, client, ns, map[string]string{"app": "web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 4 {
		t.Fatalf("Pods of the Deployment: %v, want 4", podNames(pods))
	}
	ips := map[string]string{} // Pod IP: Pod
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || !podutil.IsPodReady(&p) || p.DeletionTimestamp != nil {
			t.Errorf("Pod %s: phase %s, conditions %s, deletionTimestamp %v; want Running and Ready", p.Name, p.Status.Phase,
				podConditions(&p), p.DeletionTimestamp)
		}
		if err := simulatedPlacement(&p, nodes); err != nil {
			t.Errorf("Pod %s: %v", p.Name, err)
		}
		if other, dup := ips[p.Status.PodIP]; dup {
			t.Errorf("Pods %s and %s: the same IP %s", other, p.Name, p.Status.PodIP)
		}
		ips[p.Status.PodIP] = p.Name
		// Both times are to the second, the creation time rounded down:
		// the Ready one can be no less than the delay after it.
		if c := podCondition(&p, corev1.PodReady); c != nil && c.LastTransitionTime.Sub(p.CreationTimestamp.Time) < simulatedStartupDelay {
			t.Errorf("Pod %s: created %s, Ready %s, before --simulated-pod-startup-delay=%s", p.Name,
				p.CreationTimestamp.UTC().Format(time.RFC3339), c.LastTransitionTime.UTC().Format(time.RFC3339), simulatedStartupDelay)
		}
	}
}

// checkSimulatedJob: a Job of 2 completions finishes Complete, its 2 Pods
// Succeeded on simulated nodes and no longer Ready, their containers
// terminated with exit code 0.
func checkSimulatedJob(t *testing.T, client kubernetes.Interface) {
	const ns = "simulated-job"
	workNamespace(t, client, ns)
	ctx := context.Background()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "batch"},
		Spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2), BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"true"}}}}}},
	}
	if _, err := client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "Job batch Complete, 2 succeeded, none failed", func(ctx context.Context) (bool, string) {
		j, err := client.BatchV1().Jobs(ns).Get(ctx, "batch", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := jobCondition(j, batchv1.JobComplete)
		return c != nil && c.Status == corev1.ConditionTrue && j.Status.Succeeded == 2 && j.Status.Failed == 0 && j.Status.CompletionTime != nil,
			fmt.Sprintf("succeeded %d, failed %d, completionTime %v, conditions %s", j.Status.Succeeded, j.Status.Failed,
				j.Status.CompletionTime, jobConditions(j))
	})
	nodes, err := simulatedNodes(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := podsOf(ctx, client, ns, map[string]string{batchv1.JobNameLabel: "batch"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 {
		t.Fatalf("Pods of the Job: %v, want 2", podNames(pods))
	}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("Pod %s: phase %s, want Succeeded", p.Name, p.Status.Phase)
		}
		if err := simulatedPlacement(&p, nodes); err != nil {
			t.Errorf("Pod %s: %v", p.Name, err)
		}
		if len(p.Status.ContainerStatuses) != 1 {
			t.Errorf("Pod %s: container statuses %+v, want one", p.Name, p.Status.ContainerStatuses)
			continue
		}
		if term := p.Status.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 0 {
			t.Errorf("Pod %s: container state %+v, want terminated with exit code 0", p.Name, p.Status.ContainerStatuses[0].State)
		}
		// A finished Pod is no longer Ready, as the kubelet reports it.
		for _, ct := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
			if c := podCondition(&p, ct); c == nil || c.Status != corev1.ConditionFalse || c.Reason != kubeletstatus.PodCompleted {
				t.Errorf("Pod %s: condition %s is %+v, want False with reason %s", p.Name, ct, c, kubeletstatus.PodCompleted)
			}
		}
	}
}

// checkSimulatedStatefulSet: a StatefulSet of 3 (OrderedReady) creates
// each Pod only once the one before is Ready, as a watch started before
// the StatefulSet sees them, and all 3 end Ready, counted in its status.
func checkSimulatedStatefulSet(t *testing.T, client kubernetes.Interface) {
	const ns = "simulated-statefulset"
	workNamespace(t, client, ns)
	ctx := context.Background()
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	labels := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), ServiceName: "db",
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "postgres"}}}}},
	}
	if _, err := client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The events in the order the apiserver wrote them: "created db-0",
	// "Ready db-0", ...
	var seen []string
	created, ready := map[string]bool{}, map[string]bool{}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	_, err = watchtools.UntilWithoutRetry(wctx, w, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Error {
			return false, apierrors.FromObject(ev.Object)
		}
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			seen = append(seen, "deleted "+p.Name)
			return false, nil
		}
		if !created[p.Name] {
			created[p.Name] = true
			seen = append(seen, "created "+p.Name)
		}
		if !ready[p.Name] && podutil.IsPodReady(p) {
			ready[p.Name] = true
			seen = append(seen, "Ready "+p.Name)
		}
		return len(ready) == 3, nil
	})
	if err != nil {
		t.Fatalf("3 Pods of the StatefulSet Ready: %v; seen: %q", err, seen)
	}
	want := []string{"created db-0", "Ready db-0", "created db-1", "Ready db-1", "created db-2", "Ready db-2"}
	if !slices.Equal(seen, want) {
		t.Errorf("Pods of the StatefulSet, in order: %q, want %q (each Pod created once the one before is Ready)", seen, want)
	}

	harness.Eventually(t, 30*time.Second, "StatefulSet status: 3 replicas, all Ready and available", func(ctx context.Context) (bool, string) {
		s, err := client.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := s.Status
		return st.ObservedGeneration == s.Generation && st.Replicas == 3 && st.ReadyReplicas == 3 && st.AvailableReplicas == 3,
			fmt.Sprintf("%+v (generation %d)", st, s.Generation)
	})
	nodes, err := simulatedNodes(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := podsOf(ctx, client, ns, labels)
	if err != nil {
		t.Fatal(err)
	}
	if names := podNames(pods); !slices.Equal(names, []string{"db-0", "db-1", "db-2"}) {
		t.Errorf("Pods of the StatefulSet: %v, want db-0, db-1, db-2", names)
	}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || !podutil.IsPodReady(&p) {
			t.Errorf("Pod %s: phase %s, conditions %s; want Running and Ready", p.Name, p.Status.Phase, podConditions(&p))
		}
		if err := simulatedPlacement(&p, nodes); err != nil {
			t.Errorf("Pod %s: %v", p.Name, err)
		}
	}
}

// checkSimulatedNoKubelet: logs, exec, attach and port-forward of a Pod
// on a simulated node fail at once, with a 400 saying the node is
// simulated, rather than dial the node's address. (Nothing here requests
// nodes/proxy, which must fail the same way: were it to dial, it would
// dial 198.18.0.0/15.)
func checkSimulatedNoKubelet(t *testing.T, srv *harness.APIServer, client kubernetes.Interface) {
	const ns = "simulated-no-kubelet"
	workNamespace(t, client, ns)
	ctx := context.Background()
	createPod(t, client, ns, "app", nil, corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}})
	var node string
	harness.Eventually(t, 30*time.Second, "Pod app Running and Ready", func(ctx context.Context) (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		node = p.Spec.NodeName
		return p.Status.Phase == corev1.PodRunning && podutil.IsPodReady(p), fmt.Sprintf("node %q, phase %s, conditions %s",
			p.Spec.NodeName, p.Status.Phase, podConditions(p))
	})
	if !strings.HasPrefix(node, "simulated-") {
		t.Fatalf("Pod app bound to %q, not a simulated node", node)
	}
	message := fmt.Sprintf("node %q is simulated", node)

	// The status code and message, as a client sees them.
	err := client.CoreV1().Pods(ns).GetLogs("app", &corev1.PodLogOptions{}).Do(ctx).Error()
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), message) {
		t.Errorf("GET pods/log: %v (reason %q); want a BadRequest saying %s", err, apierrors.ReasonForError(err), message)
	}

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"logs", []string{"logs", "app"}},
		// kubectl 1.37 tries a follow again every second, printing each
		// refusal, for --pod-running-timeout (20 s by default).
		{"logs --follow", []string{"logs", "--follow", "--pod-running-timeout=2s", "app"}},
		{"exec", []string{"exec", "app", "--", "true"}},
		{"attach", []string{"attach", "app"}},
		// Listens on the loopback only, on a port the kernel picks.
		{"port-forward", []string{"port-forward", "--address=127.0.0.1", "pod/app", ":80"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stderr, took := kubectlFails(t, srv, append([]string{"-n", ns}, tc.args...)...)
			if !strings.Contains(stderr, message) {
				t.Errorf("kubectl %s: stderr does not say %s:\n%s", strings.Join(tc.args, " "), message, stderr)
			}
			if took > 5*time.Second {
				t.Errorf("kubectl %s: failed after %s, want at once", strings.Join(tc.args, " "), took.Round(100*time.Millisecond))
			}
		})
	}
}

// checkSimulatedNodeFailure: a simulated node annotated
// kwok.x-k8s.io/status=custom keeps the Ready=False its status is given;
// the node lifecycle controller taints it not-ready, NoSchedule and
// NoExecute; the Pod that tolerates the NoExecute taint for 2s is evicted
// after those 2s, and deleted, while the one that tolerates it for an
// hour stays.
func checkSimulatedNodeFailure(t *testing.T, client kubernetes.Interface) {
	const ns, node = "simulated-node-failure", simulatedFailing
	workNamespace(t, client, ns)
	ctx := context.Background()
	for name, seconds := range map[string]int64{"brief": 2, "patient": 3600} {
		spec := pinnedSpec(node)
		// Without a toleration of its own, the DefaultTolerationSeconds
		// admission plugin would give the Pod 300s.
		spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(seconds)}}
		createPod(t, client, ns, name, nil, spec)
	}
	harness.Eventually(t, 30*time.Second, "Pods brief and patient Running and Ready on "+node, func(ctx context.Context) (bool, string) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var state []string
		ok := len(pods.Items) == 2
		for _, p := range pods.Items {
			ok = ok && p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning && podutil.IsPodReady(&p)
			state = append(state, fmt.Sprintf("%s on %q: %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, podConditions(&p)))
		}
		return ok, strings.Join(state, "; ")
	})
	brief, err := client.CoreV1().Pods(ns).Get(ctx, "brief", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", "brief").String(), ResourceVersion: brief.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// The annotation first: the nodes' controller would make a node Ready
	// again that it sees NotReady without it.
	if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"kwok.x-k8s.io/status":"custom"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		i := slices.IndexFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady })
		if i < 0 {
			return fmt.Errorf("node %s has no Ready condition: %v", node, n.Status.Conditions)
		}
		n.Status.Conditions[i] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse,
			Reason: "TestFailure", Message: "made NotReady by the test", LastHeartbeatTime: now, LastTransitionTime: now}
		_, err = client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	failed := time.Now()

	var tainted time.Time // when the NoExecute taint was added, to the second
	harness.Eventually(t, 30*time.Second, "node "+node+" still Ready=False, tainted not-ready NoSchedule and NoExecute", func(ctx context.Context) (bool, string) {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var taints []string
		for _, taint := range n.Spec.Taints {
			taints = append(taints, taint.ToString())
			if taint.Key == corev1.TaintNodeNotReady && taint.Effect == corev1.TaintEffectNoExecute && taint.TimeAdded != nil {
				tainted = taint.TimeAdded.Time
			}
		}
		ready := nodeReady(n)
		return ready == corev1.ConditionFalse && slices.Contains(taints, corev1.TaintNodeNotReady+":NoSchedule") &&
				slices.Contains(taints, corev1.TaintNodeNotReady+":NoExecute") && !tainted.IsZero(),
			fmt.Sprintf("Ready %q, taints %q", ready, taints)
	})
	t.Logf("node %s tainted %s after it was made NotReady", node, time.Since(failed).Round(100*time.Millisecond))

	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	last := brief
	ev, err := watchtools.UntilWithoutRetry(wctx, w, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Error {
			return false, apierrors.FromObject(ev.Object)
		}
		if p, ok := ev.Object.(*corev1.Pod); ok {
			last = p
		}
		return ev.Type == watch.Deleted, nil
	})
	if err != nil {
		t.Fatalf("Pod brief (toleration 2s) not deleted within 30s of the taint (%v); last: phase %s, deletionTimestamp %v, conditions %s",
			err, last.Status.Phase, last.DeletionTimestamp, podConditions(last))
	}
	t.Logf("Pod brief deleted %s after its node was made NotReady", time.Since(failed).Round(100*time.Millisecond))
	gone := ev.Object.(*corev1.Pod)
	if c := podCondition(gone, corev1.DisruptionTarget); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "DeletionByTaintManager" {
		t.Errorf("Pod brief as deleted: conditions %s, want DisruptionTarget=True (DeletionByTaintManager)", podConditions(gone))
	} else if evicted := c.LastTransitionTime.Sub(tainted); evicted < 2*time.Second {
		// Both to the second, the taint's rounded down: the eviction can
		// be no less than the toleration after it.
		t.Errorf("Pod brief evicted %s after the NoExecute taint (at %s), before its toleration of 2s", evicted,
			tainted.UTC().Format(time.RFC3339))
	}

	// The node lifecycle controller marks a node's Pods not Ready only
	// when it finds the node unreachable itself (Ready turned Unknown),
	// not when the node reports Ready=False: patient is left as it is.
	holds(t, 3*time.Second, "Pod patient (toleration 3600s) kept", func(ctx context.Context) (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "patient", metav1.GetOptions{})
		if err != nil {
			// holds cuts the last call short at its end.
			return ctx.Err() != nil, err.Error()
		}
		return p.DeletionTimestamp == nil, fmt.Sprintf("deletionTimestamp %v, conditions %s", p.DeletionTimestamp, podConditions(p))
	})
}

// simulatedNodes returns the nodes labelled type=kwok by name.
func simulatedNodes(ctx context.Context, client kubernetes.Interface) (map[string]corev1.Node, error) {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		return nil, err
	}
	nodes := map[string]corev1.Node{}
	for _, n := range list.Items {
		nodes[n.Name] = n
	}
	return nodes, nil
}

// simulatedPodCIDRs are the pod CIDRs the simulated nodes must have, in
// name order: the first /24s of simulatedCIDR.
func simulatedPodCIDRs(t *testing.T) []netip.Prefix {
	t.Helper()
	base := netip.MustParsePrefix(simulatedCIDR).Addr().As4()
	var cidrs []netip.Prefix
	for i := range simulatedCount {
		a := base
		a[2] += byte(i)
		cidrs = append(cidrs, netip.PrefixFrom(netip.AddrFrom4(a), 24))
	}
	return cidrs
}

// simulatedPlacement says what is wrong, if anything, with where Pod p
// runs: bound to one of nodes, its host IP the node's InternalIP, and its
// Pod IP from the node's pod CIDR.
func simulatedPlacement(p *corev1.Pod, nodes map[string]corev1.Node) error {
	n, ok := nodes[p.Spec.NodeName]
	if !ok {
		return fmt.Errorf("bound to %q, not one of the simulated nodes %v", p.Spec.NodeName, slices.Sorted(maps.Keys(nodes)))
	}
	var errs []error
	var internal string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			internal = a.Address
		}
	}
	if p.Status.HostIP != internal {
		errs = append(errs, fmt.Errorf("host IP %q, want node %s's InternalIP %q", p.Status.HostIP, n.Name, internal))
	}
	cidr, err := netip.ParsePrefix(n.Spec.PodCIDR)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("node %s's pod CIDR %q: %v", n.Name, n.Spec.PodCIDR, err))...)
	}
	ip, err := netip.ParseAddr(p.Status.PodIP)
	if err != nil || !cidr.Contains(ip) {
		errs = append(errs, fmt.Errorf("Pod IP %q, want one in node %s's pod CIDR %s", p.Status.PodIP, n.Name, cidr))
	}
	if len(p.Status.PodIPs) != 1 || p.Status.PodIPs[0].IP != p.Status.PodIP {
		errs = append(errs, fmt.Errorf("Pod IPs %v, want [%s]", p.Status.PodIPs, p.Status.PodIP))
	}
	return errors.Join(errs...)
}

// kubectlFails runs kubectl against srv, which must fail, and returns
// its stderr and how long it took.
func kubectlFails(t *testing.T, srv *harness.APIServer, args ...string) (string, time.Duration) {
	t.Helper()
	path, err := harness.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, append([]string{"--kubeconfig", filepath.Join(srv.DataDir, "admin.kubeconfig"),
		"--request-timeout=20s"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("kubectl %s: still running after 30s (killed)\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), stdout.String(), stderr.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("kubectl %s: %v, want it to fail\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stderr.String(), took
}

func nodeReady(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}
