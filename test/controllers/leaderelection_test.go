package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/test/harness"
)

// leaseDuration is the components' --leader-elect-lease-duration in
// TestLeaderElectionAcrossServers: a standby takes over within it (plus
// one retry period) of the leader's death.
const leaseDuration = 4 * time.Second

// TestLeaderElectionAcrossServers runs three `kubeboot server`s on one
// etcd, in a network namespace with an address each: every apiserver is
// in the kubernetes endpoints, one of them leads each component, and when
// the leader is killed another takes over within the lease duration and
// its controllers work.
func TestLeaderElectionAcrossServers(t *testing.T) {
	if !harness.InNetNS(t, harness.Addrs(0, 1, 2)...) {
		return
	}
	c := harness.NewCluster(t, 3, "--leader-elect-lease-duration", leaseDuration.String(),
		"--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms")
	c.Command = "server"
	for i := range 3 {
		c.Start(i)
	}
	client := c.Client(0)
	harness.WaitEndpoints(t, client, harness.Addrs(0, 1, 2), 100*time.Millisecond, 30*time.Second)

	leaders := map[string]int{}
	for _, lease := range componentLeases {
		leader := -1
		harness.Eventually(t, 30*time.Second, lease+" led by one server", func(ctx context.Context) (bool, string) {
			leader = leaderOf(c, lease)
			return leader >= 0, "no server's log says it acquired the lease"
		})
		leaders[lease] = leader
	}
	t.Logf("leaders: %v", leaders)

	victim := leaders["kube-controller-manager"]
	holders := map[string]string{}
	for _, lease := range componentLeases {
		holders[lease] = holder(t, client, lease)
	}
	c.Server(victim).Kill()
	killed := time.Now()
	survivor := c.Client((victim + 1) % 3)
	for _, lease := range componentLeases {
		if leaders[lease] != victim {
			continue
		}
		harness.Eventually(t, leaseDuration+5*time.Second, lease+" taken over", func(ctx context.Context) (bool, string) {
			h := holder(t, survivor, lease)
			return h != "" && h != holders[lease], "held by " + h
		})
		t.Logf("%s taken over %s after the leader was killed", lease, time.Since(killed).Round(100*time.Millisecond))
	}

	// The new leader's controllers work.
	ns := "after-failover"
	newNamespace(t, survivor, ns)
	harness.Eventually(t, 30*time.Second, "the default ServiceAccount of a namespace created after the failover", func(ctx context.Context) (bool, string) {
		_, err := survivor.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// componentLeases are the leader leases of the in-process components.
var componentLeases = []string{"kube-controller-manager", "kube-scheduler"}

// leaderOf returns the server of c whose log says it acquired lease, or -1.
func leaderOf(c *harness.Cluster, lease string) int {
	for i := range 3 {
		s := c.Server(i)
		if s == nil {
			continue
		}
		for _, line := range strings.Split(s.Logs(), "\n") {
			if strings.Contains(line, `"Successfully acquired lease"`) && strings.Contains(line, `lock="kube-system/`+lease+`"`) {
				return i
			}
		}
	}
	return -1
}

func holder(t *testing.T, client kubernetes.Interface, lease string) string {
	t.Helper()
	l, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), lease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
