package ha

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	nodeutil "k8s.io/kubernetes/pkg/util/node"

	"github.com/kubeboot/kubeboot/test/harness"
)

// upgradeFrom is the commit in testdata/upgrade-from.
func upgradeFrom(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "upgrade-from"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			return line
		}
	}
	t.Fatal("testdata/upgrade-from names no commit")
	return ""
}

// TestUpgradeInPlace: three servers on embedded etcd and an agent, all of
// the kubeboot of testdata/upgrade-from (built from the repository's
// history), are upgraded to the tree under test by replacing the binary
// and restarting, the servers one at a time and then the agent, while
// Services are written through all three: nothing acknowledged is lost,
// each server serves the new build once restarted, the agent's Pod keeps
// running (same Pod, no container restart) and its node stays Ready. The
// longest time without an acknowledged write is logged.
func TestUpgradeInPlace(t *testing.T) {
	// Built before the network namespace, which has no network: the old
	// commit's modules need not be in the module cache yet (CI's first
	// run on a new machine). Inside, BuildAt finds it in the user's cache.
	from := upgradeFrom(t)
	old, err := harness.BuildAt(from, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !harness.InNetNS(t, harness.Addrs(0, 1, 2, 3)...) {
		return
	}
	if old, err = harness.BuildAt(from, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := newServers(t)
	// Upstream's lease timings, as under TestKillEachServerUnderLoad's
	// load: with the tests' 3 s renew deadline, a renewal caught in an
	// etcd leader change as a server stops can outlast it, and its
	// controller manager then stops its server, as its binary would exit.
	s.leases = nil
	next := s.bin
	s.bin = old
	s.start(0, "--cluster-init")
	token := s.token()
	for i := 1; i < 3; i++ {
		s.start(i, "--server", s.url(0), "--token", token)
	}
	commit := func(i int) string {
		t.Helper()
		body, err := s.client(i).Discovery().RESTClient().Get().AbsPath("/version").DoRaw(ctx)
		if err != nil {
			t.Fatalf("server %d's /version: %v", i, err)
		}
		var v version.Info
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		return v.GitCommit
	}
	for i := range 3 {
		if c := commit(i); c != from {
			t.Fatalf("server %d serves commit %q before the upgrade, want %s", i, c, from)
		}
	}

	// The agent, and a Pod on its node (the only node).
	const node = "agent-upgraded"
	agentDir := filepath.Join(t.TempDir(), "agent")
	cri := harness.NodeArgs(t, harness.StartFakeCRI(t))
	agentArgs := append([]string{"--server", "https://" + harness.Addr(0) + ":6443", "--node-name", node, "--node-ip", harness.Addr(3)}, cri...)
	agent := harness.StartAgent(t, old, agentDir, append(agentArgs, "--token", token)...)
	client := s.client(1)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "keeps-running"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10.1"}}}}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := func() *corev1.Pod {
		t.Helper()
		var p *corev1.Pod
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			var err error
			p, err = client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == node, nil
		})
		if err != nil {
			t.Fatalf("Pod %s not Running on node %s: %v (%+v)", pod.Name, node, err, p.Status)
		}
		return p
	}
	before := running()

	// The upgrade, under load.
	l := harness.NewLoad([]kubernetes.Interface{s.client(0), s.client(1), s.client(2)})
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		l.Run(loadCtx, 6)
	}()
	s.bin = next
	for i := range 3 {
		time.Sleep(2 * time.Second)
		l.Down[i].Store(true)
		t.Logf("%s: stopping server %d", time.Now().Format("15:04:05.000"), i)
		if err := s.proc[i].Terminate(time.Minute); err != nil {
			t.Errorf("stopping server %d for its upgrade: %v", i, err)
		}
		t.Logf("%s: starting server %d upgraded", time.Now().Format("15:04:05.000"), i)
		s.start(i)
		t.Logf("%s: server %d ready", time.Now().Format("15:04:05.000"), i)
		l.Down[i].Store(false)
		if c := commit(i); c == from {
			t.Errorf("server %d serves commit %s after its upgrade, the old one", i, c)
		}
	}
	if err := agent.Terminate(time.Minute); err != nil {
		t.Errorf("stopping the agent for its upgrade: %v", err)
	}
	restarted := metav1.NowMicro()
	harness.StartAgent(t, next, agentDir, agentArgs...)
	time.Sleep(2 * time.Second)
	stopLoad()
	<-loadDone

	l.Verify(t, s.client(0))
	gap, at := l.LongestGap()
	t.Logf("the longest time without an acknowledged write, upgrading three servers one at a time: %s, from %s", gap.Round(time.Millisecond), at.Format("15:04:05.000"))
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		lease, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
		if err != nil || lease.Spec.RenewTime == nil || !restarted.Before(lease.Spec.RenewTime) {
			return false, nil
		}
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return err == nil && nodeutil.IsNodeReady(n), nil
	})
	if err != nil {
		t.Errorf("node %s does not renew its lease and stay Ready after the agent's upgrade: %v", node, err)
	}
	after := running()
	if after.UID != before.UID || len(after.Status.ContainerStatuses) != 1 || after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the Pod did not keep running through the upgrade: UID %s then %s, containers %+v", before.UID, after.UID, after.Status.ContainerStatuses)
	}
}
