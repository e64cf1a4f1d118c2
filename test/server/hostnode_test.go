package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	nodeutil "k8s.io/kubernetes/pkg/util/node"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestServerNode runs `kubeboot server --node` in a private network and
// mount namespace: the real kubelet 1.37.2 as its child, on upstream's fake
// CRI runtime (the Pods' containers exist only in its memory, so the test
// needs no container runtime; TestServerNodeContainerd runs real ones),
// and kube-proxy in the server's process. It checks the node
// joins through the CSR flow with a bootstrap token, runs a Pod, answers
// the apiserver on its port with the apiserver's client certificate, and
// that kube-proxy makes a ClusterIP reach a backend.
func TestServerNode(t *testing.T) {
	addr, ok := inProxyNetNS(t)
	if !ok {
		return
	}
	srv, bin, args := startNodeServer(t, addr, harness.StartFakeCRI(t))
	client := srv.MustClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("node joins through the CSR flow", func(t *testing.T) {
		node := waitNode(ctx, t, client, nodeName)
		if got := node.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(got, "fakeRuntime://") {
			t.Errorf("container runtime %q, want upstream's fake runtime", got)
		}
		csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var bootstrapped bool
		for _, csr := range csrs.Items {
			if csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName &&
				strings.HasPrefix(csr.Spec.Username, "system:bootstrap:") && approved(csr) && len(csr.Status.Certificate) > 0 {
				bootstrapped = true
			}
		}
		if !bootstrapped {
			t.Errorf("no approved and issued kubelet client CSR from a bootstrap token among %d CSRs", len(csrs.Items))
		}
		// The node's lease is the kubelet's, renewed as system:node:<name>.
		var holder *string
		err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			lease, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			holder = lease.Spec.HolderIdentity
			return holder != nil && *holder == nodeName, nil
		})
		if err != nil {
			t.Errorf("node lease held by %v, want %s: %v", holder, nodeName, err)
		}
	})

	t.Run("a Pod runs on the kubelet", func(t *testing.T) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: metav1.NamespaceDefault},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
		}
		last := runPod(ctx, t, client, pod)
		if last.Spec.NodeName != nodeName || last.Status.PodIP == "" {
			t.Errorf("Pod on %q with IP %q, want on %s with an IP", last.Spec.NodeName, last.Status.PodIP, nodeName)
		}
	})

	t.Run("the kubelet serves a certificate of the cluster CA, for its addresses", func(t *testing.T) {
		csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var serving bool
		for _, csr := range csrs.Items {
			if csr.Spec.SignerName == certificatesv1.KubeletServingSignerName && csr.Spec.Username == "system:node:"+nodeName &&
				approved(csr) && len(csr.Status.Certificate) > 0 {
				serving = true
			}
		}
		if !serving {
			t.Errorf("no approved and issued kubelet serving CSR of node %s among %d CSRs", nodeName, len(csrs.Items))
		}
		ca, err := os.ReadFile(filepath.Join(srv.DataDir, "pki", "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca)
		conn, err := tls.Dial("tcp", net.JoinHostPort(addr, "10250"), &tls.Config{RootCAs: roots, ServerName: addr})
		if err != nil {
			t.Fatalf("the kubelet's port does not verify against the cluster CA for %s: %v", addr, err)
		}
		conn.Close()
	})

	t.Run("apiserver reaches the kubelet's port", func(t *testing.T) {
		// Through nodes/proxy: the kubelet authenticates the apiserver's
		// kubelet client certificate and asks the apiserver whether it may;
		// the apiserver verifies the kubelet's serving certificate against
		// the cluster CA (--kubelet-certificate-authority).
		body, err := client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodeName, "proxy", "pods").DoRaw(ctx)
		if err != nil {
			t.Fatalf("nodes/%s/proxy/pods: %v", nodeName, err)
		}
		if !strings.Contains(string(body), `"name":"web"`) {
			t.Errorf("the kubelet's pods do not include web: %.300s", body)
		}
	})

	// Last of the Pod's checks, and needed before the test's temporary
	// directories go: the kubelet unmounts the Pod's volumes before it
	// confirms the deletion.
	t.Run("a deleted Pod goes", func(t *testing.T) {
		deletePod(ctx, t, client, metav1.NamespaceDefault, "web")
	})

	t.Run("kube-proxy serves a ClusterIP", func(t *testing.T) {
		backend := listenHello(t, net.JoinHostPort(addr, "8080"))
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: metav1.NamespaceDefault},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		}
		svc, err := client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "hello-1", Namespace: svc.Namespace,
				Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "test"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		}
		if _, err := client.DiscoveryV1().EndpointSlices(svc.Namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitHello(t, net.JoinHostPort(svc.Spec.ClusterIP, "80"), backend)

		// The same endpoints behind a LoadBalancer Service: servicelb gives
		// it the node's address, where kube-proxy answers its port.
		lb := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "hello-lb", Namespace: metav1.NamespaceDefault},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
				Ports: []corev1.ServicePort{{Name: "http", Port: 8081, Protocol: corev1.ProtocolTCP}}},
		}
		if _, err := client.CoreV1().Services(lb.Namespace).Create(ctx, lb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		lbSlice := slice.DeepCopy()
		lbSlice.Name, lbSlice.Labels[discoveryv1.LabelServiceName] = "hello-lb-1", lb.Name
		if _, err := client.DiscoveryV1().EndpointSlices(lb.Namespace).Create(ctx, lbSlice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, time.Minute, "hello-lb's ingress is the node's address", func(ctx context.Context) (bool, string) {
			got, err := client.CoreV1().Services(lb.Namespace).Get(ctx, lb.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			ingress := got.Status.LoadBalancer.Ingress
			return len(ingress) == 1 && ingress[0].IP == addr, fmt.Sprint(ingress)
		})
		waitHello(t, net.JoinHostPort(addr, "8081"), backend)
	})
	// The server stops its kubelet (a kubelet left running would hold
	// port 10250 and fail the next), and the next start reuses the node's
	// credentials: its certificate, and the bootstrap token.
	t.Run("a restart keeps the node", func(t *testing.T) {
		csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before := kubeletPIDs(srv.DataDir)
		if len(before) != 1 {
			t.Fatalf("kubelet processes of the server: %v, want one", before)
		}
		if err := srv.Terminate(30 * time.Second); err != nil {
			t.Fatalf("stopping the server: %v", err)
		}
		if left := kubeletPIDs(srv.DataDir); len(left) > 0 {
			t.Fatalf("kubelet processes %v outlived the server", left)
		}
		restarted := metav1.NowMicro()
		srv := harness.StartReadyServer(t, 2*time.Minute, bin, srv.DataDir, args...)
		client := srv.MustClient(t)
		err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			lease, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
			return err == nil && lease.Spec.RenewTime != nil && restarted.Before(lease.Spec.RenewTime), nil
		})
		if err != nil {
			t.Fatalf("the node's lease not renewed after the restart: %v\nserver log:\n%s", err, srv.Logs())
		}
		waitNode(ctx, t, client, nodeName)
		if now := kubeletPIDs(srv.DataDir); len(now) != 1 || now[0] == before[0] {
			t.Errorf("kubelet processes after the restart: %v, want a new one (the old was %d)", now, before[0])
		}
		after, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(after.Items) != len(csrs.Items) {
			t.Errorf("%d CSRs after the restart, %d before: the kubelet should keep its certificate", len(after.Items), len(csrs.Items))
		}
		secrets, err := client.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "type=" + string(corev1.SecretTypeBootstrapToken)})
		if err != nil {
			t.Fatal(err)
		}
		if len(secrets.Items) != 1 {
			t.Errorf("%d bootstrap tokens after the restart, want the first one reused", len(secrets.Items))
		}
	})
}

// nodeName is the node the kubelet of the --node tests registers.
const nodeName = "node-0"

// nodeServerArgs are harness.NodeServerArgs with the node named nodeName,
// in the test's network and mount namespace (inProxyNetNS).
func nodeServerArgs(t *testing.T, addr, cri string) []string {
	t.Helper()
	return append(harness.NodeServerArgs(t, addr, cri), "--kubelet-arg=--hostname-override="+nodeName)
}

// startNodeServer starts a ready `kubeboot server --node` (nodeServerArgs)
// and returns it with the binary and flags it runs.
func startNodeServer(t *testing.T, addr, cri string) (*harness.APIServer, string, []string) {
	t.Helper()
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	args := nodeServerArgs(t, addr, cri)
	if cri == "" {
		args = append(args, harness.EmbeddedContainerd(t, harness.NodeDir(dataDir))...)
	}
	return harness.StartReadyServer(t, 2*time.Minute, bin, dataDir, args...), bin, args
}

// runPod creates pod and waits until it is Running and Ready.
func runPod(ctx context.Context, t *testing.T, client kubernetes.Interface, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	if _, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return p.Status.Phase == corev1.PodRunning && podutil.IsPodReady(p), nil
	})
	if err != nil {
		t.Fatalf("Pod %s not Running and Ready: %v; last: %+v", pod.Name, err, last)
	}
	return last
}

// deletePod deletes a Pod and waits until it is gone: its kubelet has
// stopped its containers and unmounted its volumes.
func deletePod(ctx context.Context, t *testing.T, client kubernetes.Interface, namespace, name string) {
	t.Helper()
	if err := client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("Pod %s still there after its deletion: %v", name, err)
	}
}

// kubeletPIDs returns the processes running the kubelet of the server
// with dataDir.
func kubeletPIDs(dataDir string) []int {
	var pids []int
	for pid, p := range harness.Processes() {
		if len(p.Args) > 1 && p.Args[1] == "kubelet" && slices.ContainsFunc(p.Args, func(a string) bool { return strings.Contains(a, dataDir) }) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitNode waits until the node name is Ready.
func waitNode(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = n
		return nodeutil.IsNodeReady(n), nil
	})
	if err != nil {
		t.Fatalf("node %s not Ready: %v (last: %+v)", name, err, node)
	}
	return node
}

func approved(csr certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
