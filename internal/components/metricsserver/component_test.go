package metricsserver_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	componentbaseconfig "k8s.io/component-base/config"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/components/metricsserver"
	"github.com/kubeboot/kubeboot/kubeboottest"
)

// TestStartsWithTheFirstNode: with no node to scrape metrics-server holds
// no lease and publishes nothing; the first Node starts it.
func TestStartsWithTheFirstNode(t *testing.T) {
	opts := metricsserver.NewOptions()
	opts.SecureServing.BindPort = 0
	s := kubeboottest.Start(t, kubeboottest.Options{Configure: func(c *controlplane.Config) {
		le := componentbaseconfig.LeaderElectionConfiguration{LeaderElect: true, ResourceLock: "leases",
			LeaseDuration: metav1.Duration{Duration: 15 * time.Second}, RenewDeadline: metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod: metav1.Duration{Duration: 500 * time.Millisecond}}
		c.Components = append(c.Components, metricsserver.New(opts, le))
	}})
	client := kubernetes.NewForConfigOrDie(s.Config)
	ctx := context.Background()

	time.Sleep(2 * time.Second)
	if _, err := client.CoordinationV1().Leases("kube-system").Get(ctx, metricsserver.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("metrics-server's lease without a Node: %v, want NotFound", err)
	}
	if _, err := client.CoreV1().Services("kube-system").Get(ctx, metricsserver.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("metrics-server's Service without a Node: %v, want NotFound", err)
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoordinationV1().Leases("kube-system").Get(ctx, metricsserver.Name, metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("metrics-server's lease after the first Node: %v", err)
	}
	t.Logf("leading %s after the first Node", time.Since(start).Round(time.Millisecond))
}
