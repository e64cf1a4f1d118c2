package server

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

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
	harness.RequireContainerd(t)
	addr, ok := inProxyNetNS(t)
	if !ok {
		return
	}
	srv, _, _ := startNodeServer(t, addr, harness.StartContainerd(t, "10.244.0.0/24"))
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
	last := runPod(ctx, t, client, pod)
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
		waitHello(t, net.JoinHostPort(svc.Spec.ClusterIP, "80"), hello)
	})

	t.Run("a deleted Pod's container stops", func(t *testing.T) {
		deletePod(ctx, t, client, metav1.NamespaceDefault, "web")
		for pid, p := range harness.Processes() {
			if len(p.Args) > 1 && p.Args[0] == harness.TestImageCommand && p.Args[1] == "serve" {
				t.Errorf("the Pod's container (process %d, %v) still runs after the Pod is gone", pid, p.Args)
			}
		}
	})
}
