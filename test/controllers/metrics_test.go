package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/test/harness"
)

// Annotations that declare a simulated Pod's usage (kwok's).
const (
	usageCPU    = "kwok.x-k8s.io/usage-cpu"
	usageMemory = "kwok.x-k8s.io/usage-memory"
)

// checkSimulatedResourceMetrics: the resource metrics API serves the
// usage simulated Pods declare, `kubectl top` shows it, and a
// HorizontalPodAutoscaler scales a Deployment up on it, then down when
// the declared usage drops.
func checkSimulatedResourceMetrics(t *testing.T, srv *harness.APIServer, client kubernetes.Interface) {
	const ns = "simulated-metrics"
	workNamespace(t, client, ns)
	ctx := context.Background()
	metrics := srv.MetricsClient(t)

	labels := map[string]string{"app": "load"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "load", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{usageCPU: "300m", usageMemory: "50Mi"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "load", Image: "load",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
			},
		},
	}
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var pod metricsv1beta1.PodMetrics
	harness.Eventually(t, time.Minute, "the Pod's metrics", func(ctx context.Context) (bool, string) {
		list, err := metrics.MetricsV1beta1().PodMetricses(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		if len(list.Items) != 1 {
			return false, fmt.Sprintf("%d PodMetrics", len(list.Items))
		}
		pod = list.Items[0]
		return true, ""
	})
	if len(pod.Containers) != 1 || pod.Containers[0].Name != "load" {
		t.Fatalf("PodMetrics %s: containers %v, want load", pod.Name, pod.Containers)
	}
	usage := pod.Containers[0].Usage
	if cpu, mem := usage.Cpu(), usage.Memory(); cpu.MilliValue() < 295 || cpu.MilliValue() > 305 || mem.Cmp(resource.MustParse("50Mi")) != 0 {
		t.Errorf("PodMetrics %s: CPU %s, memory %s; want 300m and 50Mi as declared", pod.Name, cpu, mem)
	}
	p, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node, err := metrics.MetricsV1beta1().NodeMetricses().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("NodeMetrics of %s: %v", p.Spec.NodeName, err)
	}
	if cpu := node.Usage.Cpu(); cpu.MilliValue() < 295 {
		t.Errorf("NodeMetrics %s: CPU %s, want at least its Pod's 300m", node.Name, cpu)
	}

	// kubectl top, as a user would run it.
	if out := srv.Kubectl(t, "top", "pods", "-n", ns, "--no-headers"); !strings.Contains(out, pod.Name) || !strings.Contains(out, "50Mi") {
		t.Errorf("kubectl top pods: %q, want %s with 50Mi", out, pod.Name)
	}
	out := srv.Kubectl(t, "top", "nodes", "--no-headers")
	for i := range simulatedCount {
		if name := fmt.Sprintf("simulated-%d", i); !strings.Contains(out, name) {
			t.Errorf("kubectl top nodes: %q, want %s", out, name)
		}
	}

	// 300% of the request against a target of 50%: the HPA scales to
	// its maximum.
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "load", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "load"},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    3,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
			// Down at once, not after the default 5 minutes.
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}},
		},
	}
	if _, err := client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitScaled := func(replicas int32, utilization string) {
		t.Helper()
		harness.Eventually(t, 2*time.Minute, fmt.Sprintf("the HPA at %d replicas (%s of the request)", replicas, utilization), func(ctx context.Context) (bool, string) {
			h, err := client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "load", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			d, err := client.AppsV1().Deployments(ns).Get(ctx, "load", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			var current []string
			for _, m := range h.Status.CurrentMetrics {
				if m.Resource != nil && m.Resource.Current.AverageUtilization != nil {
					current = append(current, fmt.Sprintf("%d%%", *m.Resource.Current.AverageUtilization))
				}
			}
			var conditions []string
			for _, c := range h.Status.Conditions {
				conditions = append(conditions, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Message))
			}
			return h.Status.DesiredReplicas == replicas && ptr.Deref(d.Spec.Replicas, 0) == replicas,
				fmt.Sprintf("desired %d, the Deployment's %d, utilization %v, conditions %v", h.Status.DesiredReplicas, ptr.Deref(d.Spec.Replicas, 0), current, conditions)
		})
	}
	waitScaled(3, "300%")

	// 20% of the request: down to one replica.
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:"20m"}}}}}`, usageCPU)
	srv.Kubectl(t, "patch", "deployment", "load", "-n", ns, "--type=merge", "-p", patch)
	waitScaled(1, "20%")
}

// watchMetricsAvailability watches the resource metrics APIService from
// now on and returns a check, for later, that the aggregator never found
// it unavailable once published: metrics-server is published only when it
// can authenticate the aggregator's front proxy (before that, the
// aggregator's first discovery checks were refused with 403, and each
// refusal was an error line on the server's terminal).
func watchMetricsAvailability(t *testing.T, srv *harness.APIServer) (check func(t *testing.T)) {
	t.Helper()
	config, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	aggregator, err := aggregatorclient.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := aggregator.ApiregistrationV1().APIServices().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", "v1beta1.metrics.k8s.io").String()})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		failed []string
	)
	go func() {
		defer w.Stop()
		for e := range w.ResultChan() {
			s, ok := e.Object.(*apiregistrationv1.APIService)
			if !ok {
				continue
			}
			for _, c := range s.Status.Conditions {
				if c.Type == apiregistrationv1.Available && c.Status == apiregistrationv1.ConditionFalse && c.Reason == "FailedDiscoveryCheck" {
					mu.Lock()
					failed = append(failed, c.Message)
					mu.Unlock()
				}
			}
		}
	}()
	return func(t *testing.T) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range failed {
			t.Errorf("the aggregator found the resource metrics API unavailable: %s", m)
		}
	}
}
