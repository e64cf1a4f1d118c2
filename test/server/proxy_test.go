package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestProxyClusterIP: `kubeboot proxy`, upstream's kube-proxy in nftables
// mode, programs a private network namespace so that a Service's ClusterIP
// reaches its backend, a listener on the namespace's address, and stops
// doing so once the Service is deleted.
func TestProxyClusterIP(t *testing.T) {
	addr, ok := inProxyNetNS(t)
	if !ok {
		return
	}
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	srv := harness.StartReadyAPIServer(t, time.Minute, bin, filepath.Join(t.TempDir(), "data"),
		"--bind-address", addr, "--secure-port", "0", "--service-cluster-ip-range", "10.96.0.0/16")
	client := srv.MustClient(t)
	ctx := context.Background()

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-0", Labels: map[string]string{corev1.LabelHostname: "node-0"}},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}}},
	}
	created, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = node.Status
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	backend := listenHello(t, net.JoinHostPort(addr, "8080"))

	proxy := exec.Command(bin, "proxy",
		"--kubeconfig", filepath.Join(srv.DataDir, "admin.kubeconfig"),
		"--hostname-override", "node-0",
		"--proxy-mode", "nftables",
		// nf_conntrack_max is not the namespace's to set.
		"--conntrack-max-per-core", "0",
		"--metrics-bind-address", net.JoinHostPort(addr, "10249"),
		"--healthz-bind-address", net.JoinHostPort(addr, "10256"),
		"--v", "2")
	var logs harness.LockedBuffer
	proxy.Stdout, proxy.Stderr = &logs, &logs
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = proxy.Process.Kill()
		_ = proxy.Wait()
		if t.Failed() {
			t.Logf("kube-proxy's log:\n%s", logs.String())
		}
	})

	svc, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-backend", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses: []string{addr}, NodeName: ptr.To("node-0"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
		Ports: []discoveryv1.EndpointPort{{Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	clusterIP := net.JoinHostPort(svc.Spec.ClusterIP, "80")
	waitHello(t, clusterIP, backend)
	if out, err := exec.Command("nft", "list", "table", "ip", "kube-proxy").CombinedOutput(); err != nil || !strings.Contains(string(out), svc.Spec.ClusterIP) {
		t.Errorf("nft list table ip kube-proxy: %v; want the ClusterIP %s in it:\n%s", err, svc.Spec.ClusterIP, out)
	}

	if err := client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "the deleted Service's ClusterIP stops answering", func(context.Context) (bool, string) {
		got, err := dialHello(clusterIP)
		if err != nil {
			return true, err.Error()
		}
		return false, got
	})
}

// inProxyNetNS runs the test again in a private network (and mount)
// namespace where kube-proxy can work: nft installed (or the test fails
// on CI, else is skipped), harness.Addr(0) on lo, and a route for the
// Service range 10.96.0.0/16, which locally originated traffic to a
// ClusterIP needs before kube-proxy's output hook rewrites it (a node's
// default route). In the namespace it returns the address and true.
func inProxyNetNS(t *testing.T) (string, bool) {
	t.Helper()
	requireNFT(t)
	addr := harness.Addr(0)
	if !harness.InNetNS(t, addr) {
		return "", false
	}
	if out, err := exec.Command("ip", "route", "add", "10.96.0.0/16", "dev", "lo", "src", addr).CombinedOutput(); err != nil {
		t.Fatalf("ip route add: %v: %s", err, out)
	}
	return addr, true
}

// listenHello serves one greeting line per connection on address until
// the test ends, and returns the line.
func listenHello(t *testing.T, address string) string {
	t.Helper()
	l, err := net.Listen("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	hello := fmt.Sprintf("hello from %s", address)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = fmt.Fprintln(c, hello)
			c.Close()
		}
	}()
	return hello
}

// waitHello waits until target (a ClusterIP, which kube-proxy programs
// within seconds) answers want.
func waitHello(t *testing.T, target, want string) {
	t.Helper()
	harness.Eventually(t, time.Minute, target+" answers "+strconv.Quote(want), func(context.Context) (bool, string) {
		got, err := dialHello(target)
		if err != nil {
			return false, err.Error()
		}
		return got == want, got
	})
}

// dialHello returns the first line target answers.
func dialHello(target string) (string, error) {
	c, err := net.DialTimeout("tcp", target, 500*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// TestProxyCommand: the binary runs kube-proxy as `kubeboot proxy` and
// through a link named kube-proxy, and refuses bad flags with upstream's
// one-line errors.
func TestProxyCommand(t *testing.T) {
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "kube-proxy")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		cmd     []string
		wantErr bool
		want    string
	}{
		{"help lists it", []string{bin, "--help"}, false, "kubeboot proxy"},
		{"link", []string{link, "--version"}, false, "Kubernetes v1.37.2"},
		{"its own help", []string{bin, "proxy", "--help"}, false, "--proxy-mode"},
		{"bad mode", []string{bin, "proxy", "--proxy-mode=bogus"}, true, `Mode.ProxyMode: Invalid value: "bogus"`},
		{"bad number", []string{bin, "proxy", "--conntrack-max-per-core=abc"}, true, `invalid argument "abc" for "--conntrack-max-per-core" flag`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(tc.cmd[0], tc.cmd[1:]...).CombinedOutput()
			if (err != nil) != tc.wantErr {
				t.Errorf("%v: err = %v, want error %v\n%s", tc.cmd, err, tc.wantErr, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("%v printed:\n%s\nwant %q in it", tc.cmd, out, tc.want)
			}
		})
	}
}

// requireNFT skips the test, or fails it when CI=true, unless nft
// (nftables), which kube-proxy programs through, is installed.
func requireNFT(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("nft (nftables) is not installed")
		}
		t.Skip("nft (nftables) is not installed")
	}
}
