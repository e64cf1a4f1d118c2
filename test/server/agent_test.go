package server

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeboot/kubeboot/internal/components/localstorage"
	"github.com/kubeboot/kubeboot/internal/platform/clusterjoin"
	"github.com/kubeboot/kubeboot/internal/platform/nodejoin"
	"github.com/kubeboot/kubeboot/test/harness"
)

// agentName is the node the agent of TestAgent registers.
const agentName = "agent-0"

// TestAgent joins `kubeboot agent` to a `kubeboot server` in a private
// network and mount namespace: the kubelet on upstream's fake CRI runtime
// (TestServerNodeContainerd runs real containers), kube-proxy in the
// agent's process. It checks the node joins with a bootstrap token of
// `kubeboot token create` through the CSR flow; that the agent token and
// bootstrap tokens join agents but not servers, a deleted bootstrap token
// nothing, and a rotated server token only once rotated; with its labels and taints; that its name is
// bound to its host (another data dir cannot take it); that a wrong token
// or a missing server is refused and writes nothing; and that a restart
// keeps the node without a new certificate; and that a claim placed on
// the node gets its volume in the agent's storage path.
func TestAgent(t *testing.T) {
	addr, ok := inProxyNetNS(t)
	if !ok {
		return
	}
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	const agentPassword = "the-agents-own-password"
	srv := harness.StartReadyServer(t, 2*time.Minute, bin, filepath.Join(t.TempDir(), "server"),
		"--bind-address", addr, "--secure-port", "6443", "--service-cluster-ip-range", "10.96.0.0/16", "--agent-token", agentPassword)
	client := srv.MustClient(t)
	tokenData, err := os.ReadFile(filepath.Join(srv.DataDir, "token"))
	if err != nil {
		t.Fatalf("the server's token: %v", err)
	}
	token := strings.TrimSpace(string(tokenData))
	server := "https://" + addr + ":6443"
	cri := harness.StartFakeCRI(t)
	kubelet := harness.NodeArgs(t, cri)
	agentArgs := func(name, token string) []string {
		return append([]string{"--server", server, "--token", token, "--node-name", name, "--node-ip", addr,
			"--node-label", "tier=edge", "--node-taint", "dedicated=edge:NoSchedule"}, kubelet...)
	}
	agentDir := filepath.Join(t.TempDir(), "agent")

	t.Run("refused joins write nothing", func(t *testing.T) {
		wrong := token[:len(token)-4] + "ffff"
		otherCA := "K10" + strings.Repeat("ab", 32) + token[strings.Index(token, "::"):]
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"a wrong password", agentArgs(agentName, wrong), "the token is not this cluster's"},
			{"another cluster's CA", agentArgs(agentName, otherCA), "is not the token's"},
			{"no server there", append([]string{"--server", "https://" + addr + ":1", "--token", token}, kubelet...), "connection refused"},
			{"no token", append([]string{"--server", server}, kubelet...), "--token is required"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "agent")
				a := harness.StartAgent(t, bin, dir, tc.args...)
				select {
				case <-a.Exited():
				case <-time.After(time.Minute):
					t.Fatal("the agent did not exit")
				}
				if a.ExitErr() == nil || !strings.Contains(a.Logs(), tc.want) {
					t.Errorf("exit %v, output %q; want a failure saying %q", a.ExitErr(), a.Logs(), tc.want)
				}
				if _, err := os.Stat(dir); !os.IsNotExist(err) {
					t.Errorf("the refused agent left its data dir: %v", err)
				}
			})
		}
	})

	kubeboot := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append(args, "--data-dir", srv.DataDir)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubeboot %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// The node joins with a bootstrap token, as a k3s runbook has it.
	bootstrapToken := strings.TrimSpace(kubeboot("token", "create", "--description", "agent-0's join"))
	if hash := token[:strings.Index(token, "::")]; !strings.HasPrefix(bootstrapToken, hash+"::") {
		t.Fatalf("token create printed %q, want the whole token, %s::<id>.<secret>", bootstrapToken, hash)
	}
	agent := harness.StartAgent(t, bin, agentDir, agentArgs(agentName, bootstrapToken)...)
	// The refused joins above took their own time: the node's have two
	// minutes from here.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Run("the agent's node joins through the CSR flow", func(t *testing.T) {
		node := waitNode(ctx, t, client, agentName)
		if node.Labels["tier"] != "edge" {
			t.Errorf("node labels %v, want tier=edge", node.Labels)
		}
		if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == "dedicated" && t.Value == "edge" && t.Effect == corev1.TaintEffectNoSchedule
		}) {
			t.Errorf("node taints %v, want dedicated=edge:NoSchedule", node.Spec.Taints)
		}
		// Its client certificate, asked for with the bootstrap token, and
		// then its serving certificate.
		var bootstrapped, serving bool
		var csrs *certificatesv1.CertificateSigningRequestList
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			var err error
			if csrs, err = client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{}); err != nil {
				return false, err
			}
			for _, csr := range csrs.Items {
				issued := approved(csr) && len(csr.Status.Certificate) > 0
				switch {
				case csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName && strings.HasPrefix(csr.Spec.Username, "system:bootstrap:"):
					bootstrapped = bootstrapped || issued && slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
						return strings.Contains(c.Message, "node "+agentName)
					})
				case csr.Spec.SignerName == certificatesv1.KubeletServingSignerName && csr.Spec.Username == "system:node:"+agentName:
					serving = serving || issued
				}
			}
			return bootstrapped && serving, nil
		})
		if err != nil {
			t.Errorf("kubelet client CSR of a bootstrap token issued for node %s: %v, serving CSR issued: %v, among %d CSRs", agentName, bootstrapped, serving, len(csrs.Items))
		}
		// Its Pods resolve names through the cluster DNS.
		cfg, err := os.ReadFile(filepath.Join(agentDir, "kubelet-config.yaml"))
		if err != nil || !strings.Contains(string(cfg), "clusterDNS:\n- 10.96.0.10\n") || !strings.Contains(string(cfg), "clusterDomain: cluster.local") {
			t.Errorf("the kubelet's configuration does not name the cluster DNS 10.96.0.10 in cluster.local: %v\n%s", err, cfg)
		}
		// The node's name is bound to its password, and the binding goes
		// with the Node.
		err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			s, err := client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, nodejoin.PasswordSecretName(agentName), metav1.GetOptions{})
			return err == nil && len(s.OwnerReferences) == 1 && s.OwnerReferences[0].UID == node.UID, nil
		})
		if err != nil {
			t.Errorf("node %s's password binding is not owned by its Node: %v", agentName, err)
		}
	})

	t.Run("a claim placed on the agent's node gets a directory there", func(t *testing.T) {
		const ns = metav1.NamespaceDefault
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}}},
		}
		if _, err := client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "user"},
			Spec: corev1.PodSpec{
				Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
				Containers:  []corev1.Container{{Name: "c", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
			},
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var dir string
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			c, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
			if err != nil || c.Status.Phase != corev1.ClaimBound {
				return false, nil
			}
			dir = filepath.Join(agentDir, localstorage.DirName, c.Spec.VolumeName+"_default_data")
			_, err = os.Stat(dir)
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("the claim is not bound to a volume made in the agent's storage (%s): %v", dir, err)
		}
		if err := client.CoreV1().Pods(ns).Delete(ctx, "user", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		if err := client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := os.Stat(dir)
			return os.IsNotExist(err), nil
		})
		if err != nil {
			t.Errorf("the volume's directory %s is still there after its claim's deletion: %v", dir, err)
		}
	})

	t.Run("the node's agent writes only its own Node", func(t *testing.T) {
		if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer client.CoreV1().Nodes().Delete(ctx, "other", metav1.DeleteOptions{})
		config, err := srv.Config()
		if err != nil {
			t.Fatal(err)
		}
		config.Impersonate = rest.ImpersonationConfig{UserName: nodejoin.AgentUser(agentName), Groups: []string{nodejoin.AgentsGroup}}
		agentClient := kubernetes.NewForConfigOrDie(config)
		annotate := []byte(`{"metadata":{"annotations":{"agent.test/touched":"yes"}}}`)
		if _, err := agentClient.CoreV1().Nodes().Patch(ctx, "other", types.MergePatchType, annotate, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("node %s's agent patching Node other: %v, want Forbidden", agentName, err)
		}
		if _, err := agentClient.CoreV1().Nodes().Patch(ctx, agentName, types.MergePatchType, annotate, metav1.PatchOptions{}); err != nil {
			t.Errorf("node %s's agent patching its own Node: %v", agentName, err)
		}
		if _, err := agentClient.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("node %s's agent listing Nodes (flannel does): %v", agentName, err)
		}
	})

	t.Run("another host cannot take the node's name", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "impostor")
		a := harness.StartAgent(t, bin, dir, agentArgs(agentName, token)...)
		select {
		case <-a.Exited():
		case <-time.After(time.Minute):
			t.Fatal("the impostor agent did not exit")
		}
		if a.ExitErr() == nil || !strings.Contains(a.Logs(), "the node name is taken") {
			t.Errorf("exit %v, output %q; want the name refused", a.ExitErr(), a.Logs())
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the refused agent left its data dir: %v", err)
		}
	})

	t.Run("tokens join what they may", func(t *testing.T) {
		list := kubeboot("token", "list")
		id := bootstrapToken[strings.Index(bootstrapToken, "::")+2:]
		if !strings.Contains(list, id) || !strings.Contains(list, "agent-0's join") || !strings.Contains(list, nodejoin.JoinGroup) {
			t.Errorf("token list does not show the token %s, its description and group:\n%s", id, list)
		}
		// --agent-token reaches the data dir through the cluster's record.
		var agentToken []byte
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			var err error
			agentToken, err = os.ReadFile(filepath.Join(srv.DataDir, "agent-token"))
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("agent-token in the server's data dir: %v", err)
		}
		if want := token[:strings.Index(token, "::")] + "::node:" + agentPassword; strings.TrimSpace(string(agentToken)) != want {
			t.Errorf("agent-token holds %q, want %q", agentToken, want)
		}
		// join tries a token at the join endpoints, as a server and as an
		// agent of a node of its own.
		join := func(token string) (serverErr, agentErr error) {
			t.Helper()
			tok, err := clusterjoin.ParseToken(token)
			if err != nil {
				t.Fatal(err)
			}
			c, err := clusterjoin.Dial(ctx, server, tok)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, serverErr = c.FetchFiles(ctx)
			password, err := nodejoin.NewPassword()
			if err != nil {
				t.Fatal(err)
			}
			_, agentErr = c.JoinAgent(ctx, "probe-"+password[:8], password)
			return serverErr, agentErr
		}
		for _, tc := range []struct{ name, token string }{{"the agent token", string(agentToken)}, {"a bootstrap token", bootstrapToken}} {
			serverErr, agentErr := join(tc.token)
			if agentErr != nil {
				t.Errorf("%s does not join an agent: %v", tc.name, agentErr)
			}
			if serverErr == nil || !strings.Contains(serverErr.Error(), "403") {
				t.Errorf("%s fetching the servers' files: %v, want 403", tc.name, serverErr)
			}
		}
		kubeboot("token", "delete", bootstrapToken)
		// The API server's bootstrap token authenticator reads its cache.
		var agentErr error
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			_, agentErr = join(bootstrapToken)
			return agentErr != nil && strings.Contains(agentErr.Error(), "401"), nil
		})
		if err != nil {
			t.Errorf("a deleted bootstrap token joining an agent: %v, want 401", agentErr)
		}
		out := kubeboot("token", "rotate", "--token", token, "--new-token", "a-rotated-server-password")
		rotated := token[:strings.Index(token, "::")] + "::server:a-rotated-server-password"
		if !strings.Contains(out, rotated) {
			t.Errorf("token rotate printed %q, want the new token %s", out, rotated)
		}
		if data, err := os.ReadFile(filepath.Join(srv.DataDir, "token")); err != nil || strings.TrimSpace(string(data)) != rotated {
			t.Errorf("the token file after the rotation: %q, %v", data, err)
		}
		if _, agentErr := join(token); agentErr == nil || !strings.Contains(agentErr.Error(), "401") {
			t.Errorf("the rotated-out token joining an agent: %v, want 401", agentErr)
		}
		if _, agentErr := join(rotated); agentErr != nil {
			t.Errorf("the rotated token joining an agent: %v", agentErr)
		}
	})

	t.Run("a restart keeps the node", func(t *testing.T) {
		csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := agent.Terminate(30 * time.Second); err != nil {
			t.Fatalf("stopping the agent: %v", err)
		}
		restarted := metav1.NowMicro()
		// No token: the node's data dir holds what it needs.
		harness.StartAgent(t, bin, agentDir, append([]string{"--server", server, "--node-name", agentName, "--node-ip", addr}, kubelet...)...)
		err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			lease, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, agentName, metav1.GetOptions{})
			return err == nil && lease.Spec.RenewTime != nil && restarted.Before(lease.Spec.RenewTime), nil
		})
		if err != nil {
			t.Fatalf("the node's lease not renewed after the restart: %v", err)
		}
		after, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(after.Items) != len(csrs.Items) {
			t.Errorf("%d CSRs after the restart, %d before: the kubelet should keep its certificate", len(after.Items), len(csrs.Items))
		}
	})
}
