package server

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestServerNodeContainerd runs `kubeboot server --node` with its kubelet on
// containerd and runc, in a private network and mount namespace: real
// containers, from images made on the machine (harness.StartContainerd), on
// a CNI bridge. It checks that a Pod's container runs and answers on the
// Pod's IP, that `kubectl logs` and `kubectl exec` reach it through the
// apiserver and the kubelet, that a ClusterIP Service reaches it through
// kube-proxy, and that a deleted Pod's container stops.
func TestServerNodeContainerd(t *testing.T) {
	addr, ok := inProxyNetNS(t)
	if !ok {
		return
	}
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	cri := harness.StartContainerd(t, "10.244.0.0/24")
	srv := harness.StartReadyServer(t, 2*time.Minute, bin, filepath.Join(t.TempDir(), "data"), nodeServerArgs(t, addr, cri)...)
	client := srv.MustClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	node := waitNode(ctx, t, client, nodeName)
	if got := node.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(got, "containerd://") {
		t.Errorf("container runtime %q, want containerd", got)
	}

	const port = 8080
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: metav1.NamespaceDefault, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "web", Image: harness.TestImage, ImagePullPolicy: corev1.PullNever,
			Args:  []string{"serve", "8080"},
			Ports: []corev1.ContainerPort{{ContainerPort: port}},
			// Ready only once the kubelet's probe reaches the container.
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1,
				ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}}},
		}}},
	}
	if _, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Pod
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		last, err = client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && last.Status.Phase == corev1.PodRunning && podutil.IsPodReady(last), nil
	})
	if err != nil {
		t.Fatalf("Pod not Running and Ready: %v; last: %+v", err, last.Status)
	}
	// The container's hostname is the Pod's name.
	const hello = "hello from web"

	t.Run("the container answers on the Pod's IP", func(t *testing.T) {
		if got, err := dialHello(net.JoinHostPort(last.Status.PodIP, "8080")); got != hello {
			t.Errorf("Pod IP %s answered %q (%v), want %q", last.Status.PodIP, got, err, hello)
		}
	})

	t.Run("kubectl logs", func(t *testing.T) {
		if out := kubectl(t, srv, "logs", "web"); out != "serving on :8080\n" {
			t.Errorf("kubectl logs web: %q, want the container's one line", out)
		}
	})

	t.Run("kubectl exec", func(t *testing.T) {
		if out := kubectl(t, srv, "exec", "web", "--", harness.TestImageCommand, "echo", "hi", "from", "exec"); out != "hi from exec\n" {
			t.Errorf("kubectl exec web: %q, want %q", out, "hi from exec\n")
		}
	})

	t.Run("a ClusterIP reaches the Pod", func(t *testing.T) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: metav1.NamespaceDefault},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(port)}}},
		}
		svc, err := client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		target := net.JoinHostPort(svc.Spec.ClusterIP, "80")
		var got string
		err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got, err = dialHello(target)
			if err != nil {
				got = err.Error()
			}
			return got == hello, nil
		})
		if err != nil {
			t.Errorf("%s did not reach the Pod: last %q", target, got)
		}
	})

	t.Run("a deleted Pod's container stops", func(t *testing.T) {
		if err := client.CoreV1().Pods(metav1.NamespaceDefault).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := client.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "web", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Fatalf("Pod still there after its deletion: %v", err)
		}
		for pid, p := range harness.Processes() {
			if len(p.Args) > 1 && p.Args[0] == harness.TestImageCommand && p.Args[1] == "serve" {
				t.Errorf("the Pod's container (process %d, %v) still runs after the Pod is gone", pid, p.Args)
			}
		}
	})
}
