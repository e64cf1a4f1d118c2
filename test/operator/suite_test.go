package operator_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/kubeboot/kubeboot/kubeboottest/envtest"
	"github.com/kubeboot/kubeboot/test/operator"
)

// The suite's shared state, as a kubebuilder suite_test.go keeps it.
var (
	testEnv   *envtest.Environment
	k8sClient client.Client
	scheme    *runtime.Scheme
)

func TestMain(m *testing.M) {
	if os.Getenv(exitingChildEnv) != "" {
		runExitingChild()
		return
	}
	os.Exit(runSuite(m))
}

// newEnvironment is the suite's Environment: what a kubebuilder suite
// writes for controller-runtime's envtest, plus the controllers kubeboot
// runs on request.
func newEnvironment() *envtest.Environment {
	return &envtest.Environment{
		Scheme:                scheme,
		CRDDirectoryPaths:     []string{filepath.Join("config", "crd")},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join("config", "webhook")},
		},
		Controllers: []string{"garbagecollector", "namespace"},
	}
}

func runSuite(m *testing.M) int {
	var err error
	if scheme, err = operator.NewScheme(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	testEnv = newEnvironment()
	if _, err := testEnv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the test environment:", err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if k8sClient, err = startOperator(ctx, testEnv); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// startOperator runs the operator's manager against env, its webhook
// server where env's WebhookInstallOptions put the webhooks, until ctx
// ends, and returns once the webhook server accepts connections.
func startOperator(ctx context.Context, env *envtest.Environment) (client.Client, error) {
	hooks := &env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme,
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    hooks.LocalServingHost,
			Port:    hooks.LocalServingPort,
			CertDir: hooks.LocalServingCertDir,
		}),
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Several managers share the test binary: the controller names
		// repeat.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	if err := operator.Setup(mgr); err != nil {
		return nil, err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	addr := net.JoinHostPort(hooks.LocalServingHost, strconv.Itoa(hooks.LocalServingPort))
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			conn.Close()
			// Assertions read the server, not the manager's cache.
			return client.New(env.Config, client.Options{Scheme: scheme})
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("webhook server at %s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
