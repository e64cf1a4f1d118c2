// Package ha tests servers on embedded etcd that form a cluster (issue 27):
// the first with --cluster-init, the others joining with --server and
// --token, each in a network namespace with an address of its own.
package ha

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/clusterjoin"
	"github.com/kubeboot/kubeboot/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

const readyTimeout = 2 * time.Minute

// servers are the test's kubeboot servers, server i on harness.Addr(i).
type servers struct {
	t    *testing.T
	bin  string
	root string
	proc map[int]*harness.APIServer
	// leases are the in-process components' leader election flags.
	leases []string
	// common are flags every server takes at every start.
	common []string
	// addr is server i's address (harness.Addr), services the
	// Services' range, of addr's family.
	addr     func(i int) string
	services string
}

// fastLeases fail a dead leader's components over in about 4 s, not
// upstream's 15: the tests that kill a leader wait for its successor.
var fastLeases = []string{"--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms"}

func newServers(t *testing.T) *servers {
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	return &servers{t: t, bin: bin, root: t.TempDir(), proc: map[int]*harness.APIServer{}, leases: fastLeases,
		addr: harness.Addr, services: "10.96.0.0/16"}
}

// url is server i's URL.
func (s *servers) url(i int) string { return "https://" + net.JoinHostPort(s.addr(i), "6443") }

func (s *servers) dataDir(i int) string { return filepath.Join(s.root, fmt.Sprintf("server%d", i)) }

func (s *servers) args(i int, extra ...string) []string {
	args := []string{"--bind-address", s.addr(i), "--advertise-address", s.addr(i), "--secure-port", "6443",
		"--service-cluster-ip-range", s.services}
	return append(append(append(args, s.leases...), s.common...), extra...)
}

// hostname is server i's host name: servers on machines of their own
// have distinct ones, which their leader election identities start with.
func hostname(i int) string { return fmt.Sprintf("server%d", i) }

// start starts server i and waits until it is ready.
func (s *servers) start(i int, extra ...string) {
	s.t.Helper()
	s.proc[i] = harness.StartReadyNamed(s.t, readyTimeout, s.bin, "server", hostname(i), s.dataDir(i), s.args(i, extra...)...)
}

// holder is the server holding the kube-system Lease name, or -1.
func (s *servers) holder(via int, name string) int {
	l, err := s.client(via).CoordinationV1().Leases(metav1.NamespaceSystem).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return -1
	}
	for i := range 4 {
		if strings.HasPrefix(*l.Spec.HolderIdentity, hostname(i)+"_") {
			return i
		}
	}
	return -1
}

// run runs server i to its end, for a start that must fail.
func (s *servers) run(i int, extra ...string) (string, error) {
	cmd := exec.Command(s.bin, append([]string{"server", "--data-dir", s.dataDir(i)}, s.args(i, extra...)...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (s *servers) token() string {
	s.t.Helper()
	data, err := os.ReadFile(filepath.Join(s.dataDir(0), "token"))
	if err != nil {
		s.t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// client is server 0's admin kubeconfig pointed at server i: one
// kubeconfig for every server, as they share the CA.
func (s *servers) client(i int) kubernetes.Interface {
	s.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags(s.url(i), filepath.Join(s.dataDir(0), "admin.kubeconfig"))
	if err != nil {
		s.t.Fatal(err)
	}
	cfg.QPS = -1
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// members runs `kubeboot etcd member list` on server i's data dir.
func (s *servers) members(i int) string {
	s.t.Helper()
	// Bounded: without a quorum the list waits on etcd.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, s.bin, "etcd", "member", "list", "--data-dir", s.dataDir(i)).CombinedOutput()
	if err != nil {
		s.t.Fatalf("etcd member list: %v\n%s", err, out)
	}
	return string(out)
}

// TestJoinServers: three servers, the first with --cluster-init, the
// others joining with its token, make one cluster: one admin kubeconfig
// works against each, the kubernetes Service lists the three, etcd has
// three voting members. Joins with a token of another cluster or a wrong
// password are refused, writing nothing and adding no member. While one
// is frozen (SIGSTOP) the others take writes, which it serves once
// thawed. When the first server is killed, writes through the others go
// on and another takes over the controller manager and the scheduler (a
// Deployment's Pods are created and bound); restarted on its data dir
// without join flags, it rejoins and has the writes. A fourth server
// killed for good leaves etcd when its Node is deleted; it joins with the server token
// rotated on another server, which every server writes to its data dir and after which the
// old token is refused, once the servers have taken the CAs rotated on another server in a
// rolling restart. When the other two die, it is not ready and takes no writes (no quorum); it
// heals without a restart when they return; with them lost for good,
// --cluster-reset makes it a cluster of one with its data.
func TestJoinServers(t *testing.T) {
	if !harness.InNetNS(t, harness.Addrs(0, 1, 2, 3)...) {
		return
	}
	ctx := context.Background()
	s := newServers(t)
	s.common = []string{"--secrets-encryption"}
	s.start(0, "--cluster-init")
	token := s.token()
	if !strings.HasPrefix(token, "K10") || !strings.Contains(token, "::server:") {
		t.Fatalf("token %q is not K10<hash>::server:<password>", token)
	}
	// Server 1 plays a node, for the scheduler to bind Pods to.
	s.start(1, "--server", s.url(0), "--token", token, "--simulated-nodes=1")
	tokenFile := filepath.Join(s.root, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Through the second server, with the token in a file.
	s.start(2, "--server", s.url(1), "--token-file", tokenFile)

	if _, err := s.client(0).CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "from-0"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.client(i).CoreV1().ConfigMaps("default").Get(ctx, "from-0", metav1.GetOptions{}); err != nil {
			t.Errorf("server %d with the first server's admin kubeconfig: %v", i, err)
		}
	}
	harness.WaitEndpoints(t, s.client(0), harness.Addrs(0, 1, 2), 100*time.Millisecond, 30*time.Second)
	list := s.members(2)
	if n := strings.Count(list, " voter"); n != 3 || strings.Contains(list, "learner") {
		t.Errorf("etcd members: want 3 voters\n%s", list)
	}
	// The members' peers reach each other over TLS with mutual
	// authentication: the CIS benchmark's 2.4 and 2.5, which kubeboot's
	// kube-bench profile leaves to this test (a lone server has no peers).
	for i := range 3 {
		flags, err := os.ReadFile(filepath.Join(s.dataDir(i), "flags", "etcd"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"--peer-client-cert-auth=true", "--peer-cert-file=", "--peer-key-file=", "--listen-peer-urls=https://" + harness.Addr(i) + ":2380"} {
			if !strings.Contains(string(flags), want) {
				t.Errorf("server %d's etcd flags have no %s: %s", i, want, flags)
			}
		}
	}

	s.encryptionCycle()

	// A joined server is a member: --cluster-init on its data dir is
	// refused before anything starts.
	if out, err := s.run(1, "--cluster-init"); err == nil || !strings.Contains(out, "is a member of the cluster it joined through "+s.url(0)) {
		t.Errorf("--cluster-init on a joined server's data dir: %v\n%s", err, out)
	}

	// Refused joins: nothing written, no member added.
	otherCluster := "K10" + strings.Repeat("0", 64) + "::server:" + strings.SplitN(token, "::server:", 2)[1]
	wrongPassword := strings.SplitN(token, "::server:", 2)[0] + "::server:wrong"
	for _, tc := range []struct{ name, token, want string }{
		{"another cluster's CA hash", otherCluster, "is not the token's"},
		{"a wrong password", wrongPassword, "401"},
		{"no CA hash", "secret", "no CA hash"},
	} {
		out, err := s.run(3, "--server", s.url(0), "--token", tc.token)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("join with %s: err %v, want a refusal saying %q\n%s", tc.name, err, tc.want, out)
		}
		if _, err := os.Stat(s.dataDir(3)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("join with %s wrote its data dir", tc.name)
		}
	}
	if list := s.members(0); strings.Count(list, "\n") != 4 {
		t.Errorf("refused joins changed the membership:\n%s", list)
	}

	// A frozen server (SIGSTOP: its etcd member stops answering): the
	// others keep taking writes; thawed, it catches up and serves them.
	if err := syscall.Kill(s.proc[2].PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for n := range 5 {
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, err := s.client(n%2).CoreV1().ConfigMaps("default").Create(wctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("while-2-frozen-%d", n)}}, metav1.CreateOptions{})
		cancel()
		if err != nil {
			t.Errorf("a write with server 2 frozen: %v", err)
		}
	}
	if err := syscall.Kill(s.proc[2].PID(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := s.client(2).CoreV1().ConfigMaps("default").Get(ctx, "while-2-frozen-4", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Errorf("server 2, thawed, does not serve the writes made while it was frozen: %v", err)
	}

	// The first server dies: the others take writes (after etcd elects
	// a new leader), another takes over the controller manager and the
	// scheduler, which it led since it started first, and it rejoins from
	// its data dir.
	for _, lease := range []string{"kube-controller-manager", "kube-scheduler"} {
		if h := s.holder(1, lease); h != 0 {
			t.Errorf("the %s Lease is held by server %d, want the first server", lease, h)
		}
	}
	s.proc[0].Kill()
	<-s.proc[0].Exited()
	var written int
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := s.client(1).CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("while-0-down-%d", written)}}, metav1.CreateOptions{})
		if err == nil {
			written++
		}
		return written == 5, nil
	})
	if err != nil {
		t.Fatalf("writes through server 1 with server 0 down: %d of 5 acknowledged: %v", written, err)
	}
	replicas := int32(2)
	deployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "after-failover"}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "after-failover"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "after-failover"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}},
	}}
	if _, err := s.client(1).AppsV1().Deployments("default").Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := s.client(1).CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=after-failover"})
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return err == nil && bound == 2, nil
	})
	if err != nil {
		t.Errorf("with the first server dead, a Deployment's Pods were not created and bound: the controller manager or scheduler did not fail over")
	}
	for _, lease := range []string{"kube-controller-manager", "kube-scheduler"} {
		if h := s.holder(1, lease); h != 1 && h != 2 {
			t.Errorf("after the first server died, the %s Lease is held by server %d", lease, h)
		}
	}
	// No step after this waits for a successor, so every start from here
	// takes upstream's lease timings: the CA rotation's restarts change
	// etcd's leader, which on a loaded machine stalled writes for ~9 s,
	// past fastLeases' 3 s renew deadline, and a leader that cannot renew
	// exits (docs/RELIABILITY.md).
	s.leases = nil
	s.start(0)
	for n := range written {
		if _, err := s.client(0).CoreV1().ConfigMaps("default").Get(ctx, fmt.Sprintf("while-0-down-%d", n), metav1.GetOptions{}); err != nil {
			t.Errorf("the restarted server 0 does not have a write acknowledged while it was down: %v", err)
		}
	}
	if list := s.members(0); strings.Count(list, " voter") != 3 {
		t.Errorf("after server 0's restart, etcd members:\n%s", list)
	}

	// The server token rotated on one server is every server's: each
	// writes it to its data dir, and the old one joins no server.
	out, err := exec.Command(s.bin, "token", "rotate", "--data-dir", s.dataDir(1), "--token", token, "--new-token", "a-rotated-server-password").CombinedOutput()
	if err != nil {
		t.Fatalf("token rotate: %v\n%s", err, out)
	}
	rotated := strings.SplitN(token, "::", 2)[0] + "::server:a-rotated-server-password"
	for i := range 3 {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			data, err := os.ReadFile(filepath.Join(s.dataDir(i), "token"))
			return err == nil && strings.TrimSpace(string(data)) == rotated, nil
		})
		if err != nil {
			t.Errorf("server %d's token file does not hold the rotated token: %v", i, err)
		}
	}
	if out, err := s.run(3, "--server", s.url(2), "--token", token); err == nil || !strings.Contains(out, "401") {
		t.Errorf("a join with the rotated-out token: %v, want 401\n%s", err, out)
	}

	// The CAs rotated on one server (cross-signed, generate-ca) are every
	// server's: each stages them, and takes them when it restarts, one at
	// a time, while the others still run on the old CAs: etcd's peers and
	// the admin's certificates are trusted across the two.
	rotated = s.rotateCA(1)
	// The server token seals the cluster's encryption configuration:
	// rotated, the configuration opens with the new one.
	if out, err := exec.Command(s.bin, "secrets-encrypt", "status", "--data-dir", s.dataDir(0)).CombinedOutput(); err != nil || !strings.Contains(string(out), "All hashes match") {
		t.Errorf("secrets-encrypt status after the token's rotation: %v\n%s", err, out)
	}

	// A server gone for good: deleting its Node (which a server with
	// --node marks as its own, as here by hand) removes its etcd member.
	s.start(3, "--server", s.url(2), "--token", rotated)
	var member string
	for _, line := range strings.Split(s.members(0), "\n") {
		if strings.Contains(line, harness.Addr(3)+":") {
			member = strings.Fields(line)[1]
		}
	}
	s.proc[3].Kill()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "server3",
		Labels:      map[string]string{controlplane.EtcdRoleLabel: "true"},
		Annotations: map[string]string{controlplane.EtcdMemberAnnotation: member},
		Finalizers:  []string{controlplane.EtcdMemberFinalizer}}}
	if _, err := s.client(1).CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.client(1).CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := s.client(0).CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if list := s.members(0); err != nil || member == "" || strings.Contains(list, member) || strings.Count(list, " voter") != 3 {
		t.Errorf("server 3 (member %q) killed and its Node deleted: Node gone: %v; etcd members:\n%s", member, err == nil, list)
	}

	// Quorum lost: server 0 is not ready and its writes fail, within the
	// client's deadline; when the others come back it heals on its own.
	lose := func() {
		t.Helper()
		for _, i := range []int{1, 2} {
			s.proc[i].Kill()
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := s.client(0).CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err != nil, nil
		})
		if err != nil {
			t.Error("server 0 stayed ready without etcd's quorum")
		}
	}
	lose()
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	if _, err := s.client(0).CoreV1().ConfigMaps("default").Create(wctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "without-quorum"}}, metav1.CreateOptions{}); err == nil {
		t.Error("a write was acknowledged without etcd's quorum")
	}
	cancel()
	s.start(1)
	s.start(2)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := s.client(0).CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "healed"}}, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
	if err != nil {
		t.Fatalf("server 0 did not heal when the others came back: %v", err)
	}

	// Servers 1 and 2 die for good: --cluster-reset makes server 0 a
	// cluster of one with its data.
	lose()
	s.proc[0].Kill()
	if out, err := s.run(0, "--cluster-reset"); err != nil || !strings.Contains(out, "without --cluster-reset") {
		t.Fatalf("--cluster-reset: %v\n%s", err, out)
	}
	s.start(0)
	if _, err := s.client(0).CoreV1().ConfigMaps("default").Get(ctx, "while-0-down-0", metav1.GetOptions{}); err != nil {
		t.Errorf("after --cluster-reset: %v", err)
	}
	if _, err := s.client(0).CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-reset"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("a write after --cluster-reset: %v", err)
	}
	if list := s.members(0); strings.Count(list, " voter") != 1 {
		t.Errorf("after --cluster-reset, etcd members:\n%s", list)
	}
}

// encryptionCycle runs --secrets-encryption's stages (prepare, rotate,
// reencrypt; disable, enable) through different servers: every server
// loads each without a restart, and reads every Secret, whichever server
// wrote it, at every stage. rotate-keys with a
// server down goes on without it, and the server takes the new keys at
// its start, before it reads a Secret.
func (s *servers) encryptionCycle() {
	s.t.Helper()
	ctx := context.Background()
	secrets := map[string]string{}
	write := func(via int, name string) {
		s.t.Helper()
		value := "value-of-" + name
		if _, err := s.client(via).CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
			StringData: map[string]string{"v": value}}, metav1.CreateOptions{}); err != nil {
			s.t.Fatal(err)
		}
		secrets[name] = value
	}
	readable := func(step string, servers ...int) {
		s.t.Helper()
		for _, i := range servers {
			for name, value := range secrets {
				got, err := s.client(i).CoreV1().Secrets("default").Get(ctx, name, metav1.GetOptions{})
				if err != nil || string(got.Data["v"]) != value {
					s.t.Fatalf("after %s, server %d reads Secret %s: %v", step, i, name, err)
				}
			}
		}
	}
	run := func(via int, args ...string) string {
		s.t.Helper()
		out, err := exec.Command(s.bin, append(append([]string{"secrets-encrypt"}, args...), "--data-dir", s.dataDir(via))...).CombinedOutput()
		if err != nil {
			s.t.Fatalf("secrets-encrypt %v through server %d: %v\n%s", args, via, err, out)
		}
		return string(out)
	}
	var status string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		out, err := exec.Command(s.bin, "secrets-encrypt", "status", "--data-dir", s.dataDir(2)).CombinedOutput()
		status = string(out)
		return err == nil && strings.Contains(status, "All hashes match") && strings.Count(status, "  yes  ") == 3, nil
	})
	if err != nil {
		s.t.Fatalf("secrets-encrypt status does not show three servers on the record: %v\n%s", err, status)
	}
	for i := range 3 {
		write(i, fmt.Sprintf("enc-%d", i))
	}
	for i, stage := range []string{"prepare", "rotate", "reencrypt"} {
		run(i, stage)
		write(i, "after-"+stage)
		readable(stage, 0, 1, 2)
	}
	status = run(0, "status")
	if !strings.Contains(status, "Current Rotation Stage: reencrypt_finished") || strings.Count(status, "  yes  ") != 3 || !strings.Contains(status, "All hashes match") {
		s.t.Errorf("after prepare, rotate, reencrypt through three servers:\n%s", status)
	}
	for i, stage := range []string{"disable", "reencrypt", "enable", "reencrypt"} {
		run((i+1)%3, stage)
		write((i+1)%3, fmt.Sprintf("after-%s-%d", stage, i))
		readable(stage, 0, 1, 2)
		if status = run(i%3, "status"); i == 1 && !strings.Contains(status, "Encryption Status: Disabled") {
			s.t.Errorf("after disable and reencrypt:\n%s", status)
		}
	}

	if err := s.proc[2].Terminate(30 * time.Second); err != nil {
		s.t.Errorf("server 2 stopping: %v", err)
	}
	out := run(1, "rotate-keys")
	if !strings.Contains(out, "down, taking it at their start: "+hostname(2)+"-") {
		s.t.Errorf("rotate-keys with server 2 down does not name it:\n%s", out)
	}
	s.t.Logf("rotate-keys with server 2 down:\n%s", out)
	write(0, "while-2-down")
	s.start(2)
	readable("rotate-keys with server 2 down, and its start", 2)
	if status = run(2, "status"); !strings.Contains(status, "All hashes match") || strings.Count(status, "  yes  ") != 3 {
		s.t.Errorf("after server 2's start:\n%s", status)
	}
	s.t.Logf("after server 2's start:\n%s", status)
}

// rotateCA runs certificate generate-ca and rotate-ca on server via's data
// dir, waits until every running server has staged the rotation, restarts
// them one at a time (each then serves writes made through another),
// and returns the join token, which carries the new CA's hash.
func (s *servers) rotateCA(via int) string {
	s.t.Helper()
	ctx := context.Background()
	staged := s.t.TempDir()
	for _, args := range [][]string{{"generate-ca", "--path", staged}, {"rotate-ca", "--path", staged}} {
		cmd := append([]string{"certificate"}, append(args, "--data-dir", s.dataDir(via))...)
		if out, err := exec.Command(s.bin, cmd...).CombinedOutput(); err != nil {
			s.t.Fatalf("%v: %v\n%s", cmd, err, out)
		}
	}
	want, err := os.ReadFile(filepath.Join(s.dataDir(via), "pki", "rotate-ca-pending", "ca.crt"))
	if err != nil {
		s.t.Fatal(err)
	}
	for i := range 3 {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			got, err := os.ReadFile(filepath.Join(s.dataDir(i), "pki", "rotate-ca-pending", "ca.crt"))
			return err == nil && bytes.Equal(got, want), nil
		})
		if err != nil {
			s.t.Fatalf("server %d did not stage the rotated CAs: %v", i, err)
		}
	}
	// Server 0 last, so that it leads no component after: the steps that
	// follow keep it up through a quorum loss, which a leader does not
	// survive (it exits when it loses its lease, as kube-controller-manager).
	for _, i := range []int{1, 2, 0} {
		if err := s.proc[i].Terminate(30 * time.Second); err != nil {
			s.t.Errorf("server %d stopping: %v", i, err)
		}
		s.start(i)
		if got, err := os.ReadFile(filepath.Join(s.dataDir(i), "pki", "ca.crt")); err != nil || !bytes.Equal(got, want) {
			s.t.Fatalf("server %d restarted without the rotated CA: %v", i, err)
		}
		name := fmt.Sprintf("after-ca-rotation-%d", i)
		if _, err := s.client((i+1)%3).CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			s.t.Errorf("a write through server %d once server %d took the rotated CAs: %v", (i+1)%3, i, err)
			continue
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := s.client(i).CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			s.t.Errorf("server %d, restarted with the rotated CAs, does not serve a write made through another: %v", i, err)
		}
	}
	if list := s.members(0); strings.Count(list, " voter") != 3 {
		s.t.Errorf("after the rolling restart with the rotated CAs, etcd members:\n%s", list)
	}
	token, err := os.ReadFile(filepath.Join(s.dataDir(2), "token"))
	if err != nil {
		s.t.Fatal(err)
	}
	if want := "K10" + clusterjoin.CAHash(want) + "::server:"; !strings.HasPrefix(string(token), want) {
		s.t.Errorf("server 2's token %q does not carry the rotated CA's hash", token)
	}
	return strings.TrimSpace(string(token))
}

// addr6 is server i's address in TestJoinServersIPv6.
func addr6(i int) string { return fmt.Sprintf("2001:db8::%d", i+1) }

// TestJoinServersIPv6: three servers of an IPv6-only cluster, every
// address IPv6: the first with --cluster-init, the others joining it at
// https://[2001:db8::1]:6443, make one cluster whose etcd members are
// peers at their IPv6 addresses; the kubernetes Service lists the three;
// a write through one is read through another; with the first killed,
// the others take writes.
func TestJoinServersIPv6(t *testing.T) {
	if !harness.InNetNS(t, addr6(0), addr6(1), addr6(2)) {
		return
	}
	ctx := context.Background()
	s := newServers(t)
	s.addr, s.services = addr6, "fd00:96::/112"
	s.common = []string{"--cluster-cidr=fd00:42::/56"}
	s.start(0, "--cluster-init")
	token := s.token()
	s.start(1, "--server", s.url(0), "--token", token)
	s.start(2, "--server", s.url(1), "--token", token)

	harness.WaitEndpoints(t, s.client(0), []string{addr6(0), addr6(1), addr6(2)}, 100*time.Millisecond, 30*time.Second)
	list := s.members(2)
	if n := strings.Count(list, " voter"); n != 3 || strings.Contains(list, "learner") {
		t.Errorf("etcd members: want 3 voters\n%s", list)
	}
	for i := range 3 {
		if peer := "https://[" + addr6(i) + "]:2380"; !strings.Contains(list, peer) {
			t.Errorf("etcd members: none is the peer %s\n%s", peer, list)
		}
	}
	if _, err := s.client(0).CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "from-0"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.client(2).CoreV1().ConfigMaps("default").Get(ctx, "from-0", metav1.GetOptions{}); err != nil {
		t.Errorf("server 2 does not serve the first server's write: %v", err)
	}

	s.proc[0].Kill()
	<-s.proc[0].Exited()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := s.client(1).CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "while-0-down"}}, metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("a write through server 1 with server 0 down: %v", err)
	}
	if _, err := s.client(2).CoreV1().ConfigMaps("default").Get(ctx, "while-0-down", metav1.GetOptions{}); err != nil {
		t.Errorf("server 2 does not serve server 1's write: %v", err)
	}
}
