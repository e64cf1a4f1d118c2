package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// PeerBinaries are the programs of the peer control plane.
type PeerBinaries struct {
	Etcd, APIServer, ControllerManager, Scheduler string
}

// BuildPeerControlPlane builds etcd 3.7.3 and kube-apiserver,
// kube-controller-manager and kube-scheduler 1.37.2 from this module's
// graph into dir.
func BuildPeerControlPlane(dir string) (PeerBinaries, error) {
	var bins PeerBinaries
	for _, b := range []struct {
		out  *string
		name string
		pkg  string
	}{
		{&bins.Etcd, "etcd", "go.etcd.io/etcd/server/v3"},
		{&bins.APIServer, "kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"},
		{&bins.ControllerManager, "kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager"},
		{&bins.Scheduler, "kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"},
	} {
		path, err := BuildCommand(filepath.Join(dir, b.name), b.pkg)
		if err != nil {
			return bins, err
		}
		*b.out = path
	}
	return bins, nil
}

// PeerControlPlane is what `kubeboot server` replaces: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler, four processes, the
// components with their own identities, per-controller service accounts
// and leader election, as kubeadm runs them.
type PeerControlPlane struct {
	// Peer is the apiserver; its Config is an admin client configuration.
	*Peer
	etcd, controllerManager, scheduler *process
}

// The peer's users: bearer tokens in kube-apiserver's --token-auth-file.
const (
	peerControllerManagerToken = "kubeboot-differential-controller-manager"
	peerSchedulerToken         = "kubeboot-differential-scheduler"
)

// PeerArgs are flags added to the peer's processes.
type PeerArgs struct {
	APIServer, ControllerManager, Scheduler []string
}

// StartPeerControlPlane starts the peer control plane with its files in
// dir, its components with args added, and returns once /readyz is 200
// and both components lead. It is stopped when the test ends.
func StartPeerControlPlane(t testing.TB, bins PeerBinaries, dir string, args PeerArgs) *PeerControlPlane {
	t.Helper()
	c := &PeerControlPlane{}
	t.Cleanup(func() {
		for _, p := range []*process{c.scheduler, c.controllerManager, c.processOf(), c.etcd} {
			if p == nil {
				continue
			}
			p.Stop()
			if t.Failed() {
				t.Logf("logs of %s in %s:\n%s", p.name, dir, p.Logs())
			}
		}
	})
	if err := c.start(bins, dir, args); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *PeerControlPlane) processOf() *process {
	if c.Peer == nil {
		return nil
	}
	return c.Peer.process
}

func (c *PeerControlPlane) start(bins PeerBinaries, dir string, extra PeerArgs) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ports := make([]int, 4)
	for i := range ports {
		var err error
		if ports[i], err = FreePort(); err != nil {
			return err
		}
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	var err error
	if c.etcd, err = startProcess(bins.Etcd, "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL, "--log-level", "error"); err != nil {
		return err
	}
	tokens := filepath.Join(dir, "component-tokens.csv")
	if err := os.WriteFile(tokens, []byte(PeerAdminToken+`,admin,admin,"system:masters"`+"\n"+
		peerControllerManagerToken+",system:kube-controller-manager,kcm\n"+
		peerSchedulerToken+",system:kube-scheduler,sched\n"), 0o600); err != nil {
		return err
	}
	if c.Peer, err = startPeer(bins.APIServer, dir, etcdURL, append([]string{"--token-auth-file=" + tokens}, extra.APIServer...)...); err != nil {
		return err
	}
	saKey, err := pki.EnsureSigningKey(filepath.Join(dir, "pki"), pki.ServiceAccountKeyName)
	if err != nil {
		return err
	}
	for _, comp := range []struct {
		p     **process
		bin   string
		token string
		port  int
		args  []string
	}{
		{&c.controllerManager, bins.ControllerManager, peerControllerManagerToken, ports[2],
			append([]string{"--use-service-account-credentials", "--service-account-private-key-file", saKey}, extra.ControllerManager...)},
		{&c.scheduler, bins.Scheduler, peerSchedulerToken, ports[3], extra.Scheduler},
	} {
		kubeconfig, err := writeKubeconfig(dir, filepath.Base(comp.bin), c.Config.Host, comp.token)
		if err != nil {
			return err
		}
		args := append([]string{"--kubeconfig", kubeconfig, "--bind-address", "127.0.0.1",
			"--secure-port", strconv.Itoa(comp.port), "--leader-elect"}, comp.args...)
		if *comp.p, err = startProcess(comp.bin, args...); err != nil {
			return err
		}
	}
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return WaitLeading(ctx, client)
}

// ControllerManagerLogs returns what kube-controller-manager printed so
// far.
func (c *PeerControlPlane) ControllerManagerLogs() string { return c.controllerManager.Logs() }

// PIDs are the IDs of the four processes.
func (c *PeerControlPlane) PIDs() []int {
	return []int{c.etcd.PID(), c.PID(), c.controllerManager.PID(), c.scheduler.PID()}
}

// writeKubeconfig writes a kubeconfig for token at url into dir and
// returns its path.
func writeKubeconfig(dir, name, url, token string) (string, error) {
	path := filepath.Join(dir, name+".kubeconfig")
	return path, os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: peer, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: %s, user: {token: %q}}]
contexts: [{name: peer, context: {cluster: peer, user: %s}}]
current-context: peer
`, url, name, token, name)), 0o600)
}

// WaitLeading waits until kube-controller-manager and kube-scheduler each
// hold their leader lease in kube-system.
func WaitLeading(ctx context.Context, client kubernetes.Interface) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
			l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err
				return false, nil
			}
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
				last = fmt.Errorf("lease %s has no holder", name)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the controller manager and scheduler to lead: %w (last: %v)", err, last)
	}
	return nil
}
