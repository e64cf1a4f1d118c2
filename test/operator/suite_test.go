package operator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// startOperator runs the operator's manager against env until ctx ends.
func startOperator(ctx context.Context, env *envtest.Environment) (client.Client, error) {
	hooks := env.WebhookInstallOptions
	return operator.StartManager(ctx, env.Config, scheme, operator.WebhookServing{
		Host: hooks.LocalServingHost, Port: hooks.LocalServingPort, CertDir: hooks.LocalServingCertDir,
	})
}
