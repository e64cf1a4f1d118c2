// Package controllers tests `kubeboot server`'s controllers, scheduler and
// leader election end to end, on the built binary: test nodes (node_test.go)
// and simulated ones (kwok's) stand in for kubelets; test/server runs
// real nodes.
package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

func newNamespace(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	if _, err := client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func podsOf(ctx context.Context, client kubernetes.Interface, ns string, selector map[string]string) ([]corev1.Pod, error) {
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(selector).String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// TestServerControllers checks the visible effect of the controllers and
// the scheduler of one `kubeboot server`, each in a namespace of its own.
func TestServerControllers(t *testing.T) {
	srv, client := harness.StartLocalServer(t)
	startNode(t, client, "node-a")
	ctx := context.Background()

	t.Run("a new namespace gets its default ServiceAccount and root CA", func(t *testing.T) {
		newNamespace(t, client, "fresh")
		ca, err := os.ReadFile(filepath.Join(srv.DataDir, "pki", "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "default ServiceAccount and kube-root-ca.crt", func(ctx context.Context) (bool, string) {
			_, saErr := client.CoreV1().ServiceAccounts("fresh").Get(ctx, "default", metav1.GetOptions{})
			cm, cmErr := client.CoreV1().ConfigMaps("fresh").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			if saErr != nil || cmErr != nil {
				return false, fmt.Sprintf("serviceaccount: %v, configmap: %v", saErr, cmErr)
			}
			return cm.Data["ca.crt"] == string(ca), "kube-root-ca.crt is not the cluster CA"
		})
	})

	t.Run("componentstatuses reports the in-process components and etcd healthy", func(t *testing.T) {
		want := []string{
			"NAME                 STATUS    MESSAGE   ERROR",
			"controller-manager   Healthy   ok        ",
			"etcd-0               Healthy   ok        ",
			"scheduler            Healthy   ok        ",
		}
		// The server probes the components concurrently: any order.
		got := strings.Split(strings.TrimSuffix(srv.Kubectl(t, "get", "componentstatuses"), "\n"), "\n")
		slices.Sort(got[1:])
		if !slices.Equal(got, want) {
			t.Errorf("kubectl get componentstatuses:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})

	t.Run("a Deployment's Pods are created and bound to the node", func(t *testing.T) {
		newNamespace(t, client, "deploy")
		srv.Kubectl(t, "create", "deployment", "web", "-n", "deploy", "--image=nginx", "--replicas=3")
		harness.Eventually(t, 30*time.Second, "3 Pods bound to node-a", func(ctx context.Context) (bool, string) {
			pods, err := podsOf(ctx, client, "deploy", map[string]string{"app": "web"})
			if err != nil {
				return false, err.Error()
			}
			var bound []string
			for _, p := range pods {
				if p.Spec.NodeName == "node-a" {
					bound = append(bound, p.Name)
				}
			}
			return len(pods) == 3 && len(bound) == 3, fmt.Sprintf("%d Pods, bound: %v", len(pods), bound)
		})
		rs, err := client.AppsV1().ReplicaSets("deploy").List(ctx, metav1.ListOptions{})
		if err != nil || len(rs.Items) != 1 || rs.Items[0].OwnerReferences[0].Name != "web" {
			t.Fatalf("ReplicaSets of the Deployment: %v, %v", rs, err)
		}
	})

	t.Run("an unschedulable Pod is reported", func(t *testing.T) {
		newNamespace(t, client, "unsched")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "nowhere"},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{"disk": "ssd"},
				Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
		}
		if _, err := client.CoreV1().Pods("unsched").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "PodScheduled=False, Unschedulable, and a FailedScheduling Event", func(ctx context.Context) (bool, string) {
			p, err := client.CoreV1().Pods("unsched").Get(ctx, "nowhere", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			var cond *corev1.PodCondition
			for i, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled {
					cond = &p.Status.Conditions[i]
				}
			}
			events, err := client.CoreV1().Events("unsched").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			var reasons []string
			for _, e := range events.Items {
				reasons = append(reasons, e.Reason+": "+e.Message)
			}
			return cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable &&
					slices.ContainsFunc(reasons, func(r string) bool {
						return strings.HasPrefix(r, "FailedScheduling: ") && strings.Contains(r, "didn't match Pod's node affinity/selector")
					}),
				fmt.Sprintf("condition %+v, events %q", cond, reasons)
		})
	})

	t.Run("garbage collection, background", func(t *testing.T) {
		selector := deleteOwnerOfPods(t, client, "gc-background", metav1.DeletePropagationBackground)
		waitPods(t, client, "gc-background", selector, 0)
	})

	t.Run("garbage collection, foreground", func(t *testing.T) {
		selector := deleteOwnerOfPods(t, client, "gc-foreground", metav1.DeletePropagationForeground)
		// The owner waits, with the foreground finalizer, for its
		// dependents; then it goes too.
		got, err := client.AppsV1().ReplicaSets("gc-foreground").Get(ctx, "owner", metav1.GetOptions{})
		if err == nil && (got.DeletionTimestamp == nil || !slices.Contains(got.Finalizers, metav1.FinalizerDeleteDependents)) {
			t.Errorf("owner right after a foreground delete: deletionTimestamp %v, finalizers %v", got.DeletionTimestamp, got.Finalizers)
		}
		waitPods(t, client, "gc-foreground", selector, 0)
		harness.Eventually(t, 30*time.Second, "the owner deleted after its dependents", func(ctx context.Context) (bool, string) {
			_, err := client.AppsV1().ReplicaSets("gc-foreground").Get(ctx, "owner", metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	})

	t.Run("garbage collection, orphan", func(t *testing.T) {
		selector := deleteOwnerOfPods(t, client, "gc-orphan", metav1.DeletePropagationOrphan)
		harness.Eventually(t, 30*time.Second, "the owner deleted and its Pods left without an owner", func(ctx context.Context) (bool, string) {
			_, err := client.AppsV1().ReplicaSets("gc-orphan").Get(ctx, "owner", metav1.GetOptions{})
			pods, perr := podsOf(ctx, client, "gc-orphan", selector)
			if perr != nil {
				return false, perr.Error()
			}
			owned := 0
			for _, p := range pods {
				owned += len(p.OwnerReferences)
			}
			return apierrors.IsNotFound(err) && len(pods) == 2 && owned == 0, fmt.Sprintf("owner: %v, %d Pods, %d owner references", err, len(pods), owned)
		})
	})

	t.Run("a namespace with content is deleted", func(t *testing.T) {
		newNamespace(t, client, "doomed")
		if _, err := client.CoreV1().ConfigMaps("doomed").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.AppsV1().ReplicaSets("doomed").Create(ctx, replicaSet("doomed", "rs", 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 60*time.Second, "namespace doomed gone", func(ctx context.Context) (bool, string) {
			ns, err := client.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
			if err != nil {
				return apierrors.IsNotFound(err), err.Error()
			}
			return false, fmt.Sprintf("phase %s, conditions %v", ns.Status.Phase, ns.Status.Conditions)
		})
	})

	t.Run("the aggregated ClusterRoles have rules", func(t *testing.T) {
		harness.Eventually(t, 30*time.Second, "admin, edit and view aggregated", func(ctx context.Context) (bool, string) {
			for _, name := range []string{"admin", "edit", "view"} {
				r, err := client.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
				if err != nil || len(r.Rules) == 0 {
					return false, fmt.Sprintf("%s: %v, %d rules", name, err, len(r.Rules))
				}
			}
			return true, ""
		})
	})

	t.Run("a ValidatingAdmissionPolicy's expressions are type-checked", func(t *testing.T) {
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "replica-limit"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{
					ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
						RuleWithOperations: admissionregistrationv1.RuleWithOperations{
							Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
							Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
						},
					}},
				},
				Validations: []admissionregistrationv1.Validation{
					{Expression: "object.spec.replicas <= 5"},
					{Expression: "object.spec.replicaz <= 5"}, // no such field
				},
			},
		}
		if _, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), policy.Name, metav1.DeleteOptions{})
		})
		harness.Eventually(t, 30*time.Second, "a warning for the misspelt field only", func(ctx context.Context) (bool, string) {
			p, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, policy.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if p.Status.ObservedGeneration != p.Generation || p.Status.TypeChecking == nil {
				return false, fmt.Sprintf("status not yet observed: %+v", p.Status)
			}
			w := p.Status.TypeChecking.ExpressionWarnings
			if len(w) != 1 || w[0].FieldRef != "spec.validations[1].expression" || !strings.Contains(w[0].Warning, "replicaz") {
				t.Fatalf("type-checking warnings %+v, want one for spec.validations[1].expression naming replicaz", w)
			}
			return true, ""
		})
	})
}

// TestServerStopsCleanly sends SIGTERM: the process exits 0, and the
// components released their leader leases first, through the apiserver
// that still served them.
func TestServerStopsCleanly(t *testing.T) {
	srv, client := harness.StartLocalServer(t)
	ctx := context.Background()
	harness.Eventually(t, 30*time.Second, "both components lead", func(ctx context.Context) (bool, string) {
		var holders []string
		for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
			l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
				return false, fmt.Sprintf("%s: %v", name, err)
			}
			holders = append(holders, *l.Spec.HolderIdentity)
		}
		return true, strings.Join(holders, ",")
	})
	if err := srv.Terminate(30 * time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}

	// The data is still there: read it with a fresh apiserver alone.
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	again := harness.StartReadyAPIServer(t, time.Minute, bin, srv.DataDir, "--bind-address", "127.0.0.1", "--secure-port", "0",
		"--service-cluster-ip-range", "10.96.0.0/16")
	client = again.MustClient(t)
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := l.Spec.HolderIdentity; h != nil && *h != "" {
			t.Errorf("lease %s still held by %s after a clean stop", name, *h)
		}
	}
}

func replicaSet(ns, name string, replicas int32) *appsv1.ReplicaSet {
	labels := map[string]string{"owner": ns + "-" + name}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
}

// deleteOwnerOfPods creates namespace ns with a ReplicaSet "owner" of two
// Pods, waits for them, deletes the owner with policy and returns the
// Pods' selector.
func deleteOwnerOfPods(t *testing.T, client kubernetes.Interface, ns string, policy metav1.DeletionPropagation) map[string]string {
	t.Helper()
	newNamespace(t, client, ns)
	created, err := client.AppsV1().ReplicaSets(ns).Create(context.Background(), replicaSet(ns, "owner", 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitPods(t, client, ns, created.Spec.Selector.MatchLabels, 2)
	if err := client.AppsV1().ReplicaSets(ns).Delete(context.Background(), "owner", metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		t.Fatal(err)
	}
	return created.Spec.Selector.MatchLabels
}

// waitPods waits until the Pods selector selects in ns are n.
func waitPods(t *testing.T, client kubernetes.Interface, ns string, selector map[string]string, n int) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, fmt.Sprintf("%d Pods in %s", n, ns), func(ctx context.Context) (bool, string) {
		pods, err := podsOf(ctx, client, ns, selector)
		if err != nil {
			return false, err.Error()
		}
		return len(pods) == n, fmt.Sprintf("%d Pods", len(pods))
	})
}

// TestServerStopsWhenTheControllerManagerLosesItsLease takes the
// controller manager's lease away: the controller manager stops, and with
// it, gracefully, the whole server, which exits non-zero naming the cause,
// as the kube-controller-manager binary exits for its supervisor.
func TestServerStopsWhenTheControllerManagerLosesItsLease(t *testing.T) {
	srv, client := harness.StartLocalServer(t, "--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s",
		"--leader-elect-retry-period", "500ms")
	harness.Eventually(t, 30*time.Second, "the controller manager leads", func(ctx context.Context) (bool, string) {
		l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "kube-controller-manager", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", fmt.Sprint(err)
	})
	// Another holder, renewing far into the future.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), "kube-controller-manager", metav1.GetOptions{})
		if err != nil {
			return err
		}
		l.Spec.HolderIdentity = ptr.To("someone-else")
		l.Spec.LeaseDurationSeconds = ptr.To[int32](3600)
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		_, err = client.CoordinationV1().Leases("kube-system").Update(context.Background(), l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the server kept running after its controller manager lost the lease")
	}
	if srv.ExitErr() == nil {
		t.Error("the server exited 0 after its controller manager lost the lease")
	}
	if logs := srv.Logs(); !strings.Contains(logs, "kube-controller-manager stopped (leader lease lost)") {
		t.Errorf("the server's log does not say why it stopped:\n%s", logs[max(0, len(logs)-3000):])
	}
}
