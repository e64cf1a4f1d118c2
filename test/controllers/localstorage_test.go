package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeboot/kubeboot/internal/components/localstorage"
	"github.com/kubeboot/kubeboot/internal/platform/nodejoin"
	"github.com/kubeboot/kubeboot/test/harness"
)

// checkSimulatedLocalStorage: the default StorageClass is local-path,
// WaitForFirstConsumer; a claim without a class waits for its Pod, then
// gets a local volume bound to the Pod's node; the volume goes with the
// claim. A node's agent may write only its own node's volumes.
func checkSimulatedLocalStorage(t *testing.T, srv *harness.APIServer, client kubernetes.Interface) {
	const ns = "simulated-storage"
	workNamespace(t, client, ns)
	ctx := context.Background()

	class, err := client.StorageV1().StorageClasses().Get(ctx, localstorage.ClassName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if class.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" || class.Provisioner != localstorage.ProvisionerName ||
		class.VolumeBindingMode == nil || *class.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer ||
		class.ReclaimPolicy == nil || *class.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("StorageClass %s: %+v; want the default, %s, WaitForFirstConsumer, Delete", class.Name, class, localstorage.ProvisionerName)
	}

	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
	claim, err = client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Spec.StorageClassName == nil || *claim.Spec.StorageClassName != localstorage.ClassName {
		t.Errorf("claim's class %v, want the default %s", claim.Spec.StorageClassName, localstorage.ClassName)
	}
	harness.Eventually(t, 10*time.Second, "the claim waits for its first consumer", func(ctx context.Context) (bool, string) {
		events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=data,reason=WaitForFirstConsumer"})
		if err != nil {
			return false, err.Error()
		}
		return len(events.Items) > 0, fmt.Sprintf("%d WaitForFirstConsumer events", len(events.Items))
	})

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "user"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var node, volume string
	harness.Eventually(t, 30*time.Second, "the Pod Running on a node, its claim Bound", func(ctx context.Context) (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "user", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		node, volume = p.Spec.NodeName, c.Spec.VolumeName
		return p.Status.Phase == corev1.PodRunning && c.Status.Phase == corev1.ClaimBound,
			fmt.Sprintf("Pod %s on %q, claim %s to %q", p.Status.Phase, node, c.Status.Phase, volume)
	})
	pv, err := client.CoreV1().PersistentVolumes().Get(ctx, volume, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Annotations[localstorage.NodeAnnotation] != node || pv.Spec.Local == nil || pv.Spec.NodeAffinity == nil ||
		fmt.Sprint(pv.Spec.NodeAffinity.Required.NodeSelectorTerms) != fmt.Sprint([]corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}) {
		t.Errorf("volume %s: annotations %v, source %+v, node affinity %+v; want a local volume of node %s", pv.Name, pv.Annotations,
			pv.Spec.PersistentVolumeSource, pv.Spec.NodeAffinity, node)
	}
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.String() != "1Gi" {
		t.Errorf("volume %s: capacity %s, want the claim's 1Gi", pv.Name, &got)
	}

	t.Run("a node's agent writes only its own node's volumes", func(t *testing.T) {
		other := "simulated-0"
		if node == other {
			other = "simulated-1"
		}
		asNode := func(node string) kubernetes.Interface {
			config, err := srv.Config()
			if err != nil {
				t.Fatal(err)
			}
			config.Impersonate = rest.ImpersonationConfig{UserName: nodejoin.AgentUser(node), Groups: []string{nodejoin.AgentsGroup}}
			return kubernetes.NewForConfigOrDie(config)
		}
		newPV := func(name, node string) *corev1.PersistentVolume {
			return &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{localstorage.NodeAnnotation: node}},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc"}},
				},
			}
		}
		if _, err := asNode(other).CoreV1().PersistentVolumes().Create(ctx, newPV("forged", node), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("node %s creating a volume of node %s: %v, want Forbidden", other, node, err)
		}
		if err := asNode(other).CoreV1().PersistentVolumes().Delete(ctx, volume, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("node %s deleting node %s's volume: %v, want Forbidden", other, node, err)
		}
		if _, err := asNode(other).CoreV1().PersistentVolumes().Create(ctx, newPV("own", other), metav1.CreateOptions{}); err != nil {
			t.Errorf("node %s creating a volume of its own: %v", other, err)
		} else if err := asNode(other).CoreV1().PersistentVolumes().Delete(ctx, "own", metav1.DeleteOptions{}); err != nil {
			t.Errorf("node %s deleting a volume of its own: %v", other, err)
		}
	})

	if err := client.CoreV1().Pods(ns).Delete(ctx, "user", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "the volume deleted with its claim", func(ctx context.Context) (bool, string) {
		pv, err := client.CoreV1().PersistentVolumes().Get(ctx, volume, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		} else if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("volume %s %s", pv.Name, pv.Status.Phase)
	})
}
