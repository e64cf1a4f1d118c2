package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/test/harness"
)

// The nodes every check of TestServerWorkloadControllers shares. The
// node checks kill and delete nodes of their own, and every Pod names its
// node, so that no check's Pods are evicted or collected by another's.
const (
	worker  = "worker"
	worker2 = "worker-2"
)

// TestServerWorkloadControllers checks the visible effect of the
// workload, service, quota, disruption and node controllers of one
// `kubeboot server`, each check in a namespace of its own. The test
// stands in for the kubelets (reportPodStatus): Pods run, get Ready and
// finish when a check says so.
func TestServerWorkloadControllers(t *testing.T) {
	srv, client := harness.StartLocalServer(t,
		// A node is unhealthy after 15s without a heartbeat (50s by
		// default). The test nodes beat every 5s and the node lifecycle
		// controller looks every second (5s by default), so a live node
		// stays ~9s clear of it.
		"--node-monitor-grace-period=15s",
		"--controller-manager-arg=--node-monitor-period=1s",
		// podgc deletes terminated Pods beyond the newest one (12500 by
		// default). No check needs its terminated Pods kept.
		"--terminated-pod-gc-threshold=1",
	)
	startNode(t, client, worker)
	startNode(t, client, worker2)

	checks := []struct {
		name  string
		check func(*testing.T, kubernetes.Interface)
	}{
		{"cronjob", checkCronJob},
		{"podgc-orphaned", checkPodGCOrphaned},
		{"node-lifecycle", checkNodeLifecycle},
		{"podgc-terminated", checkPodGCTerminated},
		{"job", checkJob},
		{"ttl-after-finished", checkTTLAfterFinished},
		{"statefulset", checkStatefulSet},
		{"daemonset", checkDaemonSet},
		{"endpointslice", checkEndpointSlice},
		{"endpointslicemirroring", checkEndpointSliceMirroring},
		{"resourcequota", checkResourceQuota},
		{"disruption", checkDisruption},
	}
	// All checks at once, not through t.Parallel, which runs no more than
	// -parallel (GOMAXPROCS) of them: they mostly wait for the
	// controllers' fixed periods (a CronJob's minute boundary, podgc's 20s
	// loop and 40s quarantine, the node grace period), and those waits
	// must overlap for the test to take about a minute on any machine.
	var wg sync.WaitGroup
	for _, c := range checks {
		wg.Go(func() { t.Run(c.name, func(t *testing.T) { c.check(t, client) }) })
	}
	wg.Wait()
	// The endpoints controllers read and write v1 Endpoints, deprecated,
	// on purpose: as in kube-controller-manager, the API's warning is not
	// logged for each of their requests.
	if n := strings.Count(srv.Logs(), "v1 Endpoints is deprecated"); n > 0 {
		t.Errorf("the server logged the v1 Endpoints deprecation warning %d times", n)
	}
}

// checkJob: a Job whose Pods succeed is Complete, one whose Pod fails
// past its backoff limit is Failed, with the Pods counted in its status.
func checkJob(t *testing.T, client kubernetes.Interface) {
	const ns = "job"
	workNamespace(t, client, ns)
	ctx := context.Background()
	for _, tc := range []struct {
		name              string
		completions       int32
		backoffLimit      int32
		report            corev1.PodPhase // what each Pod's "kubelet" reports
		want              batchv1.JobConditionType
		reason            string
		succeeded, failed int32
	}{
		{"complete", 2, 6, corev1.PodSucceeded, batchv1.JobComplete, "", 2, 0},
		{"fail", 1, 0, corev1.PodFailed, batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, 0, 1},
	} {
		job := jobOf(tc.name, tc.completions)
		job.Spec.BackoffLimit = ptr.To(tc.backoffLimit)
		if _, err := client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		selector := map[string]string{batchv1.JobNameLabel: tc.name}
		waitPods(t, client, ns, selector, int(tc.completions))
		pods, err := podsOf(ctx, client, ns, selector)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			reportPodStatus(t, client, ns, p.Name, tc.report, false)
		}
		harness.Eventually(t, 30*time.Second, fmt.Sprintf("Job %s %s (%s), %d succeeded, %d failed", tc.name, tc.want, tc.reason, tc.succeeded, tc.failed),
			func(ctx context.Context) (bool, string) {
				j, err := client.BatchV1().Jobs(ns).Get(ctx, tc.name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				c := jobCondition(j, tc.want)
				return c != nil && c.Status == corev1.ConditionTrue && (tc.reason == "" || c.Reason == tc.reason) &&
						j.Status.Succeeded == tc.succeeded && j.Status.Failed == tc.failed &&
						(tc.want != batchv1.JobComplete || j.Status.CompletionTime != nil),
					fmt.Sprintf("succeeded %d, failed %d, completionTime %v, conditions %s",
						j.Status.Succeeded, j.Status.Failed, j.Status.CompletionTime, jobConditions(j))
			})
	}
}

// checkCronJob: a CronJob due every minute creates its Job on the next
// minute boundary, and lists it as active.
func checkCronJob(t *testing.T, client kubernetes.Interface) {
	const ns = "cronjob"
	// Not workNamespace: the CronJob needs no ServiceAccount, and the
	// sooner it is created the sooner its minute boundary.
	newNamespace(t, client, ns)
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "every-minute"},
		Spec: batchv1.CronJobSpec{Schedule: "* * * * *", ConcurrencyPolicy: batchv1.ForbidConcurrent,
			JobTemplate: batchv1.JobTemplateSpec{Spec: jobOf("", 1).Spec}},
	}
	created, err := client.BatchV1().CronJobs(ns).Create(context.Background(), cj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Up to a minute until the boundary.
	harness.Eventually(t, 90*time.Second, "a Job of the CronJob, scheduled on the minute after its creation, active in its status",
		func(ctx context.Context) (bool, string) {
			jobs, err := client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			var job *batchv1.Job
			for i, j := range jobs.Items {
				if ref := metav1.GetControllerOf(&j); ref != nil && ref.UID == created.UID {
					job = &jobs.Items[i]
				}
			}
			if job == nil {
				return false, fmt.Sprintf("no Job owned by the CronJob among %d", len(jobs.Items))
			}
			cj, err := client.BatchV1().CronJobs(ns).Get(ctx, cj.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			stamp := job.Annotations[batchv1.CronJobScheduledTimestampAnnotation]
			scheduled, err := time.Parse(time.RFC3339, stamp)
			active := slices.ContainsFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.Name == job.Name })
			return err == nil && scheduled.Equal(scheduled.Truncate(time.Minute)) && scheduled.After(created.CreationTimestamp.Time) &&
					cj.Status.LastScheduleTime != nil && cj.Status.LastScheduleTime.Time.Equal(scheduled) && active,
				fmt.Sprintf("Job %s scheduled at %q (created %s), CronJob lastScheduleTime %v, active %v",
					job.Name, stamp, created.CreationTimestamp.UTC().Format(time.RFC3339), cj.Status.LastScheduleTime, cj.Status.Active)
		})
}

// checkStatefulSet: Pods are created in order, each once the one before
// runs and is Ready, counted Ready in the status, and removed from the
// highest ordinal down.
func checkStatefulSet(t *testing.T, client kubernetes.Interface) {
	const ns = "statefulset"
	workNamespace(t, client, ns)
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), ServiceName: "web",
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pinnedSpec(worker)}},
	}
	if _, err := client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	podExists := func(name string) func(ctx context.Context) (bool, string) {
		return func(ctx context.Context) (bool, string) {
			_, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil, fmt.Sprint(err)
		}
	}
	harness.Eventually(t, 30*time.Second, "Pod web-0", podExists("web-0"))
	// The controller would create web-1 within milliseconds if it did not
	// wait for web-0.
	holds(t, 2*time.Second, "no Pod web-1 while web-0 is not Running and Ready", func(ctx context.Context) (bool, string) {
		ok, state := podExists("web-1")(ctx)
		return !ok, state
	})
	reportPodStatus(t, client, ns, "web-0", corev1.PodRunning, true)
	harness.Eventually(t, 30*time.Second, "Pod web-1 once web-0 is Ready", podExists("web-1"))
	reportPodStatus(t, client, ns, "web-1", corev1.PodRunning, true)
	waitStatefulSet := func(replicas int32) {
		t.Helper()
		harness.Eventually(t, 30*time.Second, fmt.Sprintf("StatefulSet status: %d replicas, all Ready and available", replicas),
			func(ctx context.Context) (bool, string) {
				s, err := client.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				st := s.Status
				return st.ObservedGeneration == s.Generation && st.Replicas == replicas && st.ReadyReplicas == replicas && st.AvailableReplicas == replicas,
					fmt.Sprintf("%+v (generation %d)", st, s.Generation)
			})
	}
	waitStatefulSet(2)

	if _, err := client.AppsV1().StatefulSets(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`),
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "web-1 deleted on scale-in, web-0 kept", func(ctx context.Context) (bool, string) {
		pods, err := podsOf(ctx, client, ns, labels)
		if err != nil {
			return false, err.Error()
		}
		names := podNames(pods)
		return slices.Equal(names, []string{"web-0"}), fmt.Sprintf("Pods %v", names)
	})
	waitStatefulSet(1)
}

// checkDaemonSet: a DaemonSet runs one Pod on each node its node
// selector matches, bound there, and follows the nodes' labels both ways.
func checkDaemonSet(t *testing.T, client kubernetes.Interface) {
	const ns, label = "daemonset", "kubeboot.test/daemon"
	workNamespace(t, client, ns)
	ctx := context.Background()
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeSelector: map[string]string{label: "on"},
				Containers:   []corev1.Container{{Name: "c", Image: "nginx"}},
			}},
		},
	}
	if _, err := client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		node string
		on   bool
		want []string // the nodes with a Pod of the DaemonSet, sorted
	}{
		{worker, true, []string{worker}},
		{worker2, true, []string{worker, worker2}},
		{worker, false, []string{worker2}},
	} {
		value := `null`
		if step.on {
			value = `"on"`
		}
		if _, err := client.CoreV1().Nodes().Patch(ctx, step.node, types.MergePatchType,
			fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, label, value), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, fmt.Sprintf("after labelling %s %t: one DaemonSet Pod bound on each of %v, counted in its status", step.node, step.on, step.want),
			func(ctx context.Context) (bool, string) {
				pods, err := podsOf(ctx, client, ns, labels)
				if err != nil {
					return false, err.Error()
				}
				var nodes []string // "" for a Pod not bound yet
				for _, p := range pods {
					if p.DeletionTimestamp == nil {
						nodes = append(nodes, p.Spec.NodeName)
					}
				}
				slices.Sort(nodes)
				d, err := client.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				n := int32(len(step.want))
				return slices.Equal(nodes, step.want) && d.Status.DesiredNumberScheduled == n && d.Status.CurrentNumberScheduled == n,
					fmt.Sprintf("Pods on %q, status desired %d, current %d", nodes, d.Status.DesiredNumberScheduled, d.Status.CurrentNumberScheduled)
			})
	}
}

// checkEndpointSlice: a Service's EndpointSlice lists its Pods' IPs and
// target port, with their readiness, and drops deleted Pods.
func checkEndpointSlice(t *testing.T, client kubernetes.Interface) {
	const ns = "endpointslice"
	workNamespace(t, client, ns)
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: labels,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web-0", "web-1", "web-2"} {
		createPod(t, client, ns, name, labels, pinnedSpec(worker))
		reportPodStatus(t, client, ns, name, corev1.PodRunning, true)
	}
	for _, step := range []struct {
		name string
		act  func(t *testing.T)
		want map[string]bool // Pod name: Ready
	}{
		{"three Ready Pods", func(*testing.T) {}, map[string]bool{"web-0": true, "web-1": true, "web-2": true}},
		{"web-2 not Ready", func(t *testing.T) { reportPodStatus(t, client, ns, "web-2", corev1.PodRunning, false) },
			map[string]bool{"web-0": true, "web-1": true, "web-2": false}},
		{"web-1 deleted", func(t *testing.T) {
			if err := client.CoreV1().Pods(ns).Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, map[string]bool{"web-0": true, "web-2": false}},
	} {
		step.act(t)
		pods, err := podsOf(ctx, client, ns, labels)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, p := range pods {
			if ready, ok := step.want[p.Name]; ok {
				want = append(want, endpoint(p.Status.PodIP, ready, "http/8080/TCP", &corev1.ObjectReference{Name: p.Name}, worker))
			}
		}
		slices.Sort(want)
		harness.Eventually(t, 30*time.Second, step.name+": EndpointSlice endpoints "+strings.Join(want, ", "), func(ctx context.Context) (bool, string) {
			got, err := sliceEndpoints(ctx, client, ns, "web", "endpointslice-controller.k8s.io")
			return err == nil && slices.Equal(got, want), fmt.Sprintf("%q, %v", got, err)
		})
	}
}

// checkEndpointSliceMirroring: the Endpoints of a Service without a
// selector are mirrored to an EndpointSlice.
func checkEndpointSliceMirroring(t *testing.T, client kubernetes.Interface) {
	const ns = "endpointslicemirroring"
	workNamespace(t, client, ns)
	ctx := context.Background()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "external"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// v1 Endpoints, deprecated, are what the mirroring controller reads.
	eps := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "external"},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "192.0.2.42"}},
			Ports:     []corev1.EndpointPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		}},
	}
	if _, err := client.CoreV1().Endpoints(ns).Create(ctx, eps, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{endpoint("192.0.2.42", true, "http/80/TCP", nil, "")}
	harness.Eventually(t, 30*time.Second, "a mirrored EndpointSlice "+want[0], func(ctx context.Context) (bool, string) {
		got, err := sliceEndpoints(ctx, client, ns, "external", "endpointslicemirroring-controller.k8s.io")
		return err == nil && slices.Equal(got, want), fmt.Sprintf("%q, %v", got, err)
	})
}

// checkResourceQuota: the controller computes a quota's status, which
// quota admission then counts each Pod against, and gives back what
// deleted Pods used (admission only ever adds).
func checkResourceQuota(t *testing.T, client kubernetes.Interface) {
	const ns = "resourcequota"
	workNamespace(t, client, ns)
	ctx := context.Background()
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourcePods: resource.MustParse("2"),
			// No Services: the probe below that admission has the status.
			corev1.ResourceServices: resource.MustParse("0"),
		}},
	}
	if _, err := client.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed := func(pods int64) {
		t.Helper()
		harness.Eventually(t, 30*time.Second, fmt.Sprintf("quota status hard pods=2, used pods=%d", pods), func(ctx context.Context) (bool, string) {
			q, err := client.CoreV1().ResourceQuotas(ns).Get(ctx, "pods", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			hard, hasHard := q.Status.Hard[corev1.ResourcePods]
			used, hasUsed := q.Status.Used[corev1.ResourcePods]
			return hasHard && hard.Value() == 2 && hasUsed && used.Value() == pods, fmt.Sprintf("hard %v, used %v", q.Status.Hard, q.Status.Used)
		})
	}
	waitUsed(0)
	// Quota admission reads quotas from the API server's own informer,
	// which may see the status a moment after this client did; until
	// then it admits Pods uncounted, as upstream's does, and the
	// controller recounts them only at its full resync (5 minutes). A
	// Service refused for the quota says admission has the status.
	probe := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
	harness.Eventually(t, 10*time.Second, "quota admission refusing a Service over services=0", func(ctx context.Context) (bool, string) {
		_, err := client.CoreV1().Services(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return exceedsQuota(err), fmt.Sprint(err)
	})
	createPod(t, client, ns, "pod-0", nil, pinnedSpec(worker))
	createPod(t, client, ns, "pod-1", nil, pinnedSpec(worker))
	waitUsed(2)
	third := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-2"}, Spec: pinnedSpec(worker)}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, third, metav1.CreateOptions{}); !exceedsQuota(err) {
		t.Fatalf("a third Pod over a quota of 2: want Forbidden, exceeded quota; got %v", err)
	}
	if err := client.CoreV1().Pods(ns).Delete(ctx, "pod-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed(1)
	// Quota admission reads the quota from its own informer, which may
	// see the status a moment after this client did: retry, as a client
	// would.
	harness.Eventually(t, 10*time.Second, "a second Pod once the first one's quota is given back", func(ctx context.Context) (bool, string) {
		_, err := client.CoreV1().Pods(ns).Create(ctx, third, metav1.CreateOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// exceedsQuota says err is quota admission's refusal of an object over a
// quota's hard limit.
func exceedsQuota(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota")
}

// checkDisruption: a PodDisruptionBudget's status counts its healthy
// Pods and the disruptions allowed, and the eviction API follows it.
func checkDisruption(t *testing.T, client kubernetes.Interface) {
	const ns = "disruption"
	workNamespace(t, client, ns)
	ctx := context.Background()
	labels := map[string]string{"app": "db"}
	for _, name := range []string{"db-0", "db-1", "db-2"} {
		createPod(t, client, ns, name, labels, pinnedSpec(worker))
		reportPodStatus(t, client, ns, name, corev1.PodRunning, true)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	evict := func(name string) error {
		return client.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
	}
	for _, step := range []struct {
		name                             string
		act                              func(t *testing.T)
		expected, healthy, desired, more int32 // more: disruptions allowed
	}{
		{"three Ready Pods", func(*testing.T) {}, 3, 3, 2, 1},
		{"db-2 not Ready", func(t *testing.T) { reportPodStatus(t, client, ns, "db-2", corev1.PodRunning, false) }, 3, 2, 2, 0},
		{"db-0's eviction refused", func(t *testing.T) {
			if err := evict("db-0"); !apierrors.IsTooManyRequests(err) {
				t.Fatalf("evicting db-0 with no disruption allowed: want 429 Too Many Requests, got %v", err)
			}
		}, 3, 2, 2, 0},
		{"db-2 Ready again", func(t *testing.T) { reportPodStatus(t, client, ns, "db-2", corev1.PodRunning, true) }, 3, 3, 2, 1},
		{"db-0 evicted", func(t *testing.T) {
			if err := evict("db-0"); err != nil {
				t.Fatalf("evicting db-0 with a disruption allowed: %v", err)
			}
		}, 2, 2, 2, 0},
	} {
		step.act(t)
		harness.Eventually(t, 30*time.Second, fmt.Sprintf("%s: PDB status expected %d, healthy %d, desired %d, disruptions allowed %d",
			step.name, step.expected, step.healthy, step.desired, step.more), func(ctx context.Context) (bool, string) {
			p, err := client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "db", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			st := p.Status
			allowed := slices.ContainsFunc(st.Conditions, func(c metav1.Condition) bool {
				return c.Type == policyv1.DisruptionAllowedCondition && (c.Status == metav1.ConditionTrue) == (step.more > 0)
			})
			return st.ObservedGeneration == p.Generation && st.ExpectedPods == step.expected && st.CurrentHealthy == step.healthy &&
					st.DesiredHealthy == step.desired && st.DisruptionsAllowed == step.more && allowed,
				fmt.Sprintf("observed generation %d of %d, expected %d, healthy %d, desired %d, allowed %d, conditions %+v",
					st.ObservedGeneration, p.Generation, st.ExpectedPods, st.CurrentHealthy, st.DesiredHealthy, st.DisruptionsAllowed, st.Conditions)
		})
	}
}

// checkTTLAfterFinished: a finished Job is deleted once its
// ttlSecondsAfterFinished is up; an unfinished one with the same TTL
// stays.
func checkTTLAfterFinished(t *testing.T, client kubernetes.Interface) {
	const ns = "ttl-after-finished"
	workNamespace(t, client, ns)
	ctx := context.Background()
	for _, name := range []string{"done", "running"} {
		job := jobOf(name, 1)
		// Long enough to see the Job Complete before it goes.
		job.Spec.TTLSecondsAfterFinished = ptr.To[int32](5)
		if _, err := client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	selector := map[string]string{batchv1.JobNameLabel: "done"}
	waitPods(t, client, ns, selector, 1)
	pods, err := podsOf(ctx, client, ns, selector)
	if err != nil {
		t.Fatal(err)
	}
	reportPodStatus(t, client, ns, pods[0].Name, corev1.PodSucceeded, false)
	var completed time.Time
	harness.Eventually(t, 30*time.Second, "Job done Complete", func(ctx context.Context) (bool, string) {
		j, err := client.BatchV1().Jobs(ns).Get(ctx, "done", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if c := jobCondition(j, batchv1.JobComplete); c != nil && c.Status == corev1.ConditionTrue && j.Status.CompletionTime != nil {
			completed = j.Status.CompletionTime.Time
			return true, ""
		}
		return false, jobConditions(j)
	})
	harness.Eventually(t, 30*time.Second, "Job done deleted 5s after it completed", func(ctx context.Context) (bool, string) {
		_, err := client.BatchV1().Jobs(ns).Get(ctx, "done", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	// CompletionTime has a resolution of a second.
	if gone := time.Since(completed); gone < 4*time.Second {
		t.Errorf("Job done gone %s after its completion, before its TTL of 5s", gone)
	}
	if j, err := client.BatchV1().Jobs(ns).Get(ctx, "running", metav1.GetOptions{}); err != nil {
		t.Errorf("the unfinished Job with the same TTL: want it kept, got %v", err)
	} else if j.DeletionTimestamp != nil {
		t.Errorf("the unfinished Job with the same TTL: want it kept, got it deleted at %v", j.DeletionTimestamp)
	}
}

// checkNodeLifecycle: a node that stops heartbeating turns Ready=Unknown
// and is tainted unreachable; its Pods are marked not Ready, and those
// that tolerate the taint only briefly are evicted. Then podgc deletes
// the terminating Pods once the node is declared out of service.
func checkNodeLifecycle(t *testing.T, client kubernetes.Interface) {
	const ns, node = "node-lifecycle", "dying"
	workNamespace(t, client, ns)
	ctx := context.Background()
	stop := startStoppableNode(t, client, node)
	tolerate := func(seconds int64) []corev1.Toleration {
		var ts []corev1.Toleration
		for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
			ts = append(ts, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
				TolerationSeconds: ptr.To(seconds)})
		}
		return ts
	}
	// Without tolerations of their own, the DefaultTolerationSeconds
	// admission plugin would give the Pods 300s.
	for name, seconds := range map[string]int64{"brief": 1, "patient": 3600} {
		spec := pinnedSpec(node)
		spec.Tolerations = tolerate(seconds)
		createPod(t, client, ns, name, nil, spec)
		reportPodStatus(t, client, ns, name, corev1.PodRunning, true)
	}

	stop()
	stopped := time.Now()
	harness.Eventually(t, 45*time.Second, "node dying Ready=Unknown, tainted unreachable NoSchedule and NoExecute", func(ctx context.Context) (bool, string) {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var ready corev1.ConditionStatus
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = c.Status
			}
		}
		var taints []string
		for _, taint := range n.Spec.Taints {
			taints = append(taints, taint.ToString())
		}
		return ready == corev1.ConditionUnknown && slices.Contains(taints, corev1.TaintNodeUnreachable+":NoSchedule") &&
				slices.Contains(taints, corev1.TaintNodeUnreachable+":NoExecute"),
			fmt.Sprintf("Ready %q, taints %q", ready, taints)
	})
	t.Logf("node %s unreachable %s after its last heartbeat", node, time.Since(stopped).Round(time.Second))

	pod := func(ctx context.Context, name string) (*corev1.Pod, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err.Error()
		}
		return p, fmt.Sprintf("deletionTimestamp %v, conditions %s", p.DeletionTimestamp, podConditions(p))
	}
	harness.Eventually(t, 30*time.Second, "Pod brief (toleration 1s) evicted by the taint eviction controller", func(ctx context.Context) (bool, string) {
		p, state := pod(ctx, "brief")
		if p == nil {
			return false, state
		}
		c := podCondition(p, corev1.DisruptionTarget)
		return p.DeletionTimestamp != nil && c != nil && c.Status == corev1.ConditionTrue && c.Reason == "DeletionByTaintManager", state
	})
	harness.Eventually(t, 30*time.Second, "Pod patient (toleration 3600s) marked not Ready and kept", func(ctx context.Context) (bool, string) {
		p, state := pod(ctx, "patient")
		if p == nil {
			return false, state
		}
		c := podCondition(p, corev1.PodReady)
		return p.DeletionTimestamp == nil && c != nil && c.Status == corev1.ConditionFalse, state
	})

	// With no kubelet to finish it, brief's deletion waits; podgc forces
	// the deletions on a node declared shut down (the out-of-service
	// taint, which also evicts patient).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown",
			Effect: corev1.TaintEffectNoExecute, TimeAdded: ptr.To(metav1.Now())})
		_, err = client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// podgc runs every 20s.
	harness.Eventually(t, 60*time.Second, "podgc: the terminating Pods of the out-of-service node deleted", func(ctx context.Context) (bool, string) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("Pods %v", podNames(pods.Items))
	})
}

// checkPodGCOrphaned: podgc deletes a Pod bound to a node that was
// deleted, marking it Failed with a DisruptionTarget condition first.
func checkPodGCOrphaned(t *testing.T, client kubernetes.Interface) {
	const ns, node = "podgc-orphaned", "gone"
	ctx := context.Background()
	// podgc looks for orphans every 20s, from the controllers' start
	// (seconds after the server's), and deletes them 40s after it first
	// saw them. The check creates the default ServiceAccount and binds its
	// Pod itself, rather than wait for the serviceaccount controller and
	// the scheduler, so that the node is deleted before podgc's first
	// pass and the Pod collected 40s later rather than up to 60s.
	newNamespace(t, client, ns)
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	stop := startStoppableNode(t, client, node)
	spec := pinnedSpec(node)
	spec.NodeName = node
	createPod(t, client, ns, "orphan", nil, spec)
	reportPodStatus(t, client, ns, "orphan", corev1.PodRunning, true)
	p, err := client.CoreV1().Pods(ns).Get(ctx, "orphan", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", "orphan").String(), ResourceVersion: p.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if err := client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	last := p
	ev, err := watchtools.UntilWithoutRetry(wctx, w, func(ev watch.Event) (bool, error) {
		if p, ok := ev.Object.(*corev1.Pod); ok {
			last = p
		}
		return ev.Type == watch.Deleted, nil
	})
	if err != nil {
		t.Fatalf("Pod orphan of deleted node %s: not deleted within 90s (%v); last: phase %s, conditions %s", node, err, last.Status.Phase, podConditions(last))
	}
	t.Logf("orphaned Pod deleted %s after its node", time.Since(deleted).Round(time.Second))
	gone := ev.Object.(*corev1.Pod)
	if c := podCondition(gone, corev1.DisruptionTarget); gone.Status.Phase != corev1.PodFailed || c == nil || c.Reason != "DeletionByPodGC" {
		t.Errorf("Pod orphan as deleted: want phase Failed and a DisruptionTarget condition DeletionByPodGC, got phase %s, conditions %s",
			gone.Status.Phase, podConditions(gone))
	}
}

// checkPodGCTerminated: over --terminated-pod-gc-threshold=1, podgc
// deletes the oldest terminated Pods, and not Pods still running.
func checkPodGCTerminated(t *testing.T, client kubernetes.Interface) {
	const ns = "podgc-terminated"
	workNamespace(t, client, ns)
	for _, p := range []struct {
		name  string
		phase corev1.PodPhase
	}{
		{"done-0", corev1.PodFailed}, {"done-1", corev1.PodSucceeded}, {"done-2", corev1.PodSucceeded}, {"alive", corev1.PodRunning},
	} {
		spec := pinnedSpec(worker)
		spec.RestartPolicy = corev1.RestartPolicyNever
		createPod(t, client, ns, p.name, nil, spec)
		reportPodStatus(t, client, ns, p.name, p.phase, true)
	}
	// podgc runs every 20s. done-2 is the newest here (created last;
	// podgc orders equal creation times, to the second, by name), but a
	// newer terminated Pod of another check may be the one kept.
	harness.Eventually(t, 60*time.Second, "done-0 and done-1 deleted, alive kept", func(ctx context.Context) (bool, string) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		names := podNames(pods.Items)
		return slices.Equal(names, []string{"alive"}) || slices.Equal(names, []string{"alive", "done-2"}), fmt.Sprintf("Pods %v", names)
	})
	if p, err := client.CoreV1().Pods(ns).Get(context.Background(), "alive", metav1.GetOptions{}); err != nil {
		t.Errorf("the running Pod: want it kept, got %v", err)
	} else if p.DeletionTimestamp != nil {
		t.Errorf("the running Pod: want it kept, got it deleted at %v", p.DeletionTimestamp)
	}
}

// workNamespace creates namespace ns and waits for its default
// ServiceAccount, without which the ServiceAccount admission plugin
// refuses the Pods a check creates itself.
func workNamespace(t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	newNamespace(t, client, ns)
	harness.Eventually(t, 30*time.Second, "ServiceAccount default in "+ns, func(ctx context.Context) (bool, string) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// pinnedSpec is a Pod spec of one container that only node fits.
func pinnedSpec(node string) corev1.PodSpec {
	return corev1.PodSpec{
		NodeSelector: map[string]string{corev1.LabelHostname: node},
		Containers:   []corev1.Container{{Name: "c", Image: "nginx"}},
	}
}

func createPod(t *testing.T, client kubernetes.Interface, ns, name string, labels map[string]string, spec corev1.PodSpec) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: spec}
	if _, err := client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Pod %s/%s: %v", ns, name, err)
	}
}

// jobOf is a Job of completions Pods at once on the worker node.
func jobOf(name string, completions int32) *batchv1.Job {
	spec := pinnedSpec(worker)
	spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{Completions: ptr.To(completions), Parallelism: ptr.To(completions),
			Template: corev1.PodTemplateSpec{Spec: spec}},
	}
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i, c := range j.Status.Conditions {
		if c.Type == t {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

func jobConditions(j *batchv1.Job) string {
	var s []string
	for _, c := range j.Status.Conditions {
		s = append(s, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason))
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// podCondition is p's condition of type t, nil if it has none.
func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	_, c := podutil.GetPodCondition(&p.Status, t)
	return c
}

func podConditions(p *corev1.Pod) string {
	var s []string
	for _, c := range p.Status.Conditions {
		s = append(s, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason))
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// podNames returns the names of pods, sorted.
func podNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// sliceEndpoints lists the endpoints of Service ns/svc's EndpointSlices
// that manager manages, as endpoint describes them, sorted.
func sliceEndpoints(ctx context.Context, client kubernetes.Interface, ns, svc, manager string) ([]string, error) {
	list, err := client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + svc + "," + discoveryv1.LabelManagedBy + "=" + manager,
	})
	if err != nil {
		return nil, err
	}
	var got []string
	for _, s := range list.Items {
		var ports []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s/%d/%s", ptr.Deref(p.Name, ""), ptr.Deref(p.Port, 0), ptr.Deref(p.Protocol, "")))
		}
		for _, e := range s.Endpoints {
			got = append(got, endpoint(strings.Join(e.Addresses, ","), ptr.Deref(e.Conditions.Ready, false), strings.Join(ports, ","),
				e.TargetRef, ptr.Deref(e.NodeName, "")))
		}
	}
	slices.Sort(got)
	return got, nil
}

// endpoint describes an EndpointSlice endpoint for sliceEndpoints.
func endpoint(addresses string, ready bool, ports string, pod *corev1.ObjectReference, node string) string {
	s := fmt.Sprintf("%s ready=%t ports=%s", addresses, ready, ports)
	if pod != nil {
		s += " pod=" + pod.Name
	}
	if node != "" {
		s += " node=" + node
	}
	return s
}

// holds checks cond every 100ms for d, failing the test as soon as it
// does not hold.
func holds(t *testing.T, d time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, d, true, func(ctx context.Context) (bool, error) {
		ok, state := cond(ctx)
		last = state
		if !ok {
			return false, fmt.Errorf("broken")
		}
		return false, nil
	})
	if err != nil && !wait.Interrupted(err) {
		t.Fatalf("%s: broken within %s; seen: %s", what, d, last)
	}
}
