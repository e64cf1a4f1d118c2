package server

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/kubeboot/kubeboot/internal/components/gateway"
	"github.com/kubeboot/kubeboot/internal/components/gateway/dataplane"
	"github.com/kubeboot/kubeboot/test/harness"
)

// TestGatewayDisabled: a server restarted with the Gateway API and
// Ingress disabled removes their classes and the nodes' configuration,
// and runs on (the removal is retried while the server's authorizer has
// not yet seen the component's rights, as any write of it is).
func TestGatewayDisabled(t *testing.T) {
	t.Parallel()
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	args := []string{"--bind-address", "127.0.0.1", "--secure-port", "0", "--service-cluster-ip-range", "10.96.0.0/16"}
	exists := func(err error) (bool, string) {
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	}
	gone := func(err error) (bool, string) {
		if err == nil {
			return false, "still there"
		}
		return apierrors.IsNotFound(err), err.Error()
	}

	srv := harness.StartReadyServer(t, time.Minute, bin, dataDir, args...)
	client := srv.MustClient(t)
	config, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	gw := gatewayclient.NewForConfigOrDie(config)
	pathType := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: metav1.NamespaceDefault},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "web.example", IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pathType,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}}
	if _, err := client.NetworkingV1().Ingresses(ing.Namespace).Create(context.Background(), ing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, "GatewayClass and IngressClass kubeboot, and the nodes' configuration", func(ctx context.Context) (bool, string) {
		if _, err := gw.GatewayV1().GatewayClasses().Get(ctx, gateway.ClassName, metav1.GetOptions{}); err != nil {
			return exists(err)
		}
		if _, err := client.NetworkingV1().IngressClasses().Get(ctx, gateway.ClassName, metav1.GetOptions{}); err != nil {
			return exists(err)
		}
		_, err := client.CoreV1().Secrets(dataplane.Namespace).Get(ctx, dataplane.SecretName, metav1.GetOptions{})
		return exists(err)
	})
	if err := srv.Terminate(time.Minute); err != nil {
		t.Fatal(err)
	}

	srv = harness.StartReadyServer(t, time.Minute, bin, dataDir, append(args, "--disable=gateway-api,ingress")...)
	client = srv.MustClient(t)
	if config, err = srv.Config(); err != nil {
		t.Fatal(err)
	}
	gw = gatewayclient.NewForConfigOrDie(config)
	harness.Eventually(t, time.Minute, "no GatewayClass or IngressClass kubeboot, no nodes' configuration", func(ctx context.Context) (bool, string) {
		if _, err := gw.GatewayV1().GatewayClasses().Get(ctx, gateway.ClassName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return gone(err)
		}
		if _, err := client.NetworkingV1().IngressClasses().Get(ctx, gateway.ClassName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return gone(err)
		}
		_, err := client.CoreV1().Secrets(dataplane.Namespace).Get(ctx, dataplane.SecretName, metav1.GetOptions{})
		return gone(err)
	})
	select {
	case <-srv.Exited():
		t.Fatalf("the server stopped: %v\n%s", srv.ExitErr(), srv.Logs())
	case <-time.After(3 * time.Second):
	}
}
