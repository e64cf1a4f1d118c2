package gateway

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	componentbaseconfig "k8s.io/component-base/config"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/kubeboottest"
)

// TestInstallWaitsForControllers: the Gateway API's CRDs are not created
// while the cluster's controllers start (no controller manager runs
// here, so the default ServiceAccount never comes); they are after the
// component's bound. waitForControllers, as the component's user, returns
// once the ServiceAccount exists.
func TestInstallWaitsForControllers(t *testing.T) {
	// The bound is long beside the sampling below, so that a slow Start
	// (a loaded machine) cannot eat it.
	const limit = 10 * time.Second
	c := New(*NewOptions(), componentbaseconfig.LeaderElectionConfiguration{})
	c.controllersWait = limit
	s := kubeboottest.Start(t, kubeboottest.Options{Configure: func(cfg *controlplane.Config) {
		cfg.Components = append(cfg.Components, c)
	}})
	started := time.Now()
	ext := apiextensionsclientset.NewForConfigOrDie(s.Config).ApiextensionsV1().CustomResourceDefinitions()
	ctx := context.Background()
	const crd = "gateways.gateway.networking.k8s.io"

	// Sampled for 3 s: without the wait, the CRDs are created within a
	// second of the server's start.
	for time.Since(started) < 3*time.Second {
		if _, err := ext.Get(ctx, crd, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%s %v after the start, before the controllers ran: %v, want NotFound", crd, time.Since(started).Round(time.Millisecond), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := ext.Get(ctx, crd, metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("%s not created after the %v bound: %v", crd, limit, err)
	}

	config, err := s.UserConfig(User)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(config)
	start := time.Now()
	waitForControllers(ctx, kube, time.Second)
	if took := time.Since(start); took < time.Second {
		t.Errorf("without the default ServiceAccount, waitForControllers returned after %v, want its 1s bound", took)
	}
	admin := kubernetes.NewForConfigOrDie(s.Config)
	if _, err := admin.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	start = time.Now()
	waitForControllers(ctx, kube, time.Minute)
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("with the default ServiceAccount, waitForControllers returned after %v, want at once (can the component's user not watch it?)", took)
	}
}
