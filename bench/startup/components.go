//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// With -server the benchmark measures `kubeboot server` (apiserver,
// controller manager and scheduler in one process) and, with -peer,
// kube-apiserver, kube-controller-manager, kube-scheduler and etcd, four
// processes. Either is ready once /readyz is 200, the controller manager
// and the scheduler each hold their leader lease, acquired or renewed
// since the start, and the controllers run: the serviceaccount controller
// has created the default namespace's "default" ServiceAccount, which a
// Pod there needs.

// componentLeases are the leader leases in kube-system.
var componentLeases = []string{"kube-controller-manager", "kube-scheduler"}

// componentsReady returns a check that both components lead and the
// controllers run, on a client built from config once config succeeds.
func componentsReady(config func() (*rest.Config, error), since time.Time) func(context.Context) bool {
	var client kubernetes.Interface
	return func(ctx context.Context) bool {
		if client == nil {
			cfg, err := config()
			if err != nil {
				return false
			}
			cfg.QPS = -1
			if client, err = kubernetes.NewForConfig(cfg); err != nil {
				return false
			}
		}
		for _, name := range componentLeases {
			l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" ||
				l.Spec.RenewTime == nil || l.Spec.RenewTime.Time.Before(since) {
				return false
			}
		}
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}
}

// adminConfig reads kubeboot's admin kubeconfig in dataDir.
func adminConfig(dataDir string) func() (*rest.Config, error) {
	return func() (*rest.Config, error) {
		return clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "admin.kubeconfig"))
	}
}

// peerTokens are the bearer tokens of the peer's users, in
// kube-apiserver's --token-auth-file format.
const (
	peerAdminToken      = "admin-token"
	peerControllerToken = "controller-manager-token"
	peerSchedulerToken  = "scheduler-token"
	peerTokenFile       = peerAdminToken + ",admin,admin,system:masters\n" +
		peerControllerToken + ",system:kube-controller-manager,kcm\n" +
		peerSchedulerToken + ",system:kube-scheduler,sched\n"
)

// peerAdmin is the peer apiserver's admin client configuration.
func peerAdmin(url string) func() (*rest.Config, error) {
	return func() (*rest.Config, error) {
		return &rest.Config{Host: url, BearerToken: peerAdminToken, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, nil
	}
}

// writePeerKubeconfig writes a kubeconfig for token at url into dir and
// returns its path.
func writePeerKubeconfig(dir, name, url, token string) (string, error) {
	path := filepath.Join(dir, name+".kubeconfig")
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: peer, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: %s, user: {token: %q}}]
contexts: [{name: peer, context: {cluster: peer, user: %s}}]
current-context: peer
`, url, name, token, name)
	return path, os.WriteFile(path, []byte(kubeconfig), 0o600)
}

// startPeerComponents starts kube-controller-manager and kube-scheduler
// against the peer apiserver at url, as a kubeadm control plane runs them
// (one service account per controller, leader election on).
func (b *bench) startPeerComponents(dir, url, saKey string) (cm, sched *server, err error) {
	cmConfig, err := writePeerKubeconfig(dir, "controller-manager", url, peerControllerToken)
	if err != nil {
		return nil, nil, err
	}
	schedConfig, err := writePeerKubeconfig(dir, "scheduler", url, peerSchedulerToken)
	if err != nil {
		return nil, nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, nil, err
	}
	cm, err = start(b.controllerManagerBin, "--kubeconfig", cmConfig, "--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(ports[0]), "--use-service-account-credentials",
		"--service-account-private-key-file", saKey, "--leader-elect")
	if err != nil {
		return nil, nil, err
	}
	sched, err = start(b.schedulerBin, "--kubeconfig", schedConfig, "--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(ports[1]), "--leader-elect")
	if err != nil {
		_ = cm.stop()
		return nil, nil, err
	}
	return cm, sched, nil
}
