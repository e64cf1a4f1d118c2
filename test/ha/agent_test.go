package ha

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	nodeutil "k8s.io/kubernetes/pkg/util/node"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestAgentFailover: an agent joined through one of three servers learns
// the others, and when that server is killed its node keeps renewing its
// lease and stays Ready through another (the agent's balancer).
func TestAgentFailover(t *testing.T) {
	if !harness.InNetNS(t, harness.Addrs(0, 1, 2, 3)...) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := newServers(t)
	s.start(0, "--cluster-init")
	token := s.token()
	for i := 1; i < 3; i++ {
		s.start(i, "--server", s.url(0), "--token", token)
	}
	const name = "agent-ha"
	dir := filepath.Join(t.TempDir(), "agent")
	harness.StartAgent(t, s.bin, dir, append([]string{"--server", "https://" + harness.Addr(0) + ":6443", "--token", token,
		"--node-name", name, "--node-ip", harness.Addr(3)}, harness.NodeArgs(t, harness.StartFakeCRI(t))...)...)
	client := s.client(1)
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && nodeutil.IsNodeReady(n), nil
	})
	if err != nil {
		t.Fatalf("node %s not Ready: %v", name, err)
	}
	// The agent learns every server.
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		data, err := os.ReadFile(filepath.Join(dir, "servers"))
		return err == nil && len(strings.Fields(string(data))) == 3, nil
	})
	if err != nil {
		t.Fatalf("the agent does not know the three servers: %v", err)
	}

	s.proc[0].Kill()
	killed := metav1.NowMicro()
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		lease, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		return err == nil && lease.Spec.RenewTime != nil && killed.Before(lease.Spec.RenewTime), nil
	})
	if err != nil {
		t.Fatalf("node %s's lease not renewed after its server was killed: %v", name, err)
	}
	n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil || !nodeutil.IsNodeReady(n) {
		t.Errorf("node %s not Ready after its server was killed: %v", name, err)
	}
}
