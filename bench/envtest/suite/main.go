//go:build linux

// Command suite runs the sample operator's suite (test/operator) as an
// operator's envtest suite would: one test environment with the CRDs and
// webhooks, the operator's manager, then -tests tests, each in a
// namespace of its own: create a Website, wait for the controller's
// Deployment and ConfigMap, scale it, see the webhook refuse a bad one,
// read it through the conversion webhook as v1, delete it. With
// -env=envtest the environment is controller-runtime's envtest driving
// the kube-apiserver and etcd binaries in $KUBEBUILDER_ASSETS; with
// -env=kubeboot it is kubeboot's envtest, in this process. It prints one
// JSON line: the phases' durations and the peak RSS of this process and
// its children (kube-apiserver and etcd for envtest), summed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubeboot/kubeboot/kubeboottest/envtest"
	"github.com/kubeboot/kubeboot/test/harness"
	"github.com/kubeboot/kubeboot/test/operator"
	v1 "github.com/kubeboot/kubeboot/test/operator/api/v1"
	v2 "github.com/kubeboot/kubeboot/test/operator/api/v2"
)

// Result is what one run prints.
type Result struct {
	Env         string  `json:"env"`
	Tests       int     `json:"tests"`
	StartMS     float64 `json:"start_ms"`
	SuiteMS     float64 `json:"suite_ms"`
	StopMS      float64 `json:"stop_ms"`
	PeakRSSKiB  int     `json:"peak_rss_kib"`
	Processes   int     `json:"processes"`
	FailedTests int     `json:"failed_tests"`
}

func main() {
	env := flag.String("env", "kubeboot", "kubeboot or envtest")
	tests := flag.Int("tests", 50, "tests to run")
	configDir := flag.String("config", "test/operator/config", "the sample operator's config directory (crd/, webhook/)")
	flag.Parse()
	if err := run(*env, *tests, *configDir); err != nil {
		fmt.Fprintln(os.Stderr, "suite:", err)
		os.Exit(1)
	}
}

func run(env string, tests int, configDir string) error {
	scheme, err := operator.NewScheme()
	if err != nil {
		return err
	}
	crds, hooks := filepath.Join(configDir, "crd"), filepath.Join(configDir, "webhook")
	var (
		cfg   *rest.Config
		where operator.WebhookServing
		stop  func() error
	)
	res := Result{Env: env, Tests: tests}
	start := time.Now()
	switch env {
	case "kubeboot":
		e := &envtest.Environment{Scheme: scheme, CRDDirectoryPaths: []string{crds}, ErrorIfCRDPathMissing: true,
			WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{hooks}}}
		cfg, err = e.Start()
		where = operator.WebhookServing{Host: e.WebhookInstallOptions.LocalServingHost, Port: e.WebhookInstallOptions.LocalServingPort, CertDir: e.WebhookInstallOptions.LocalServingCertDir}
		stop = e.Stop
	case "envtest":
		e := &crenvtest.Environment{Scheme: scheme, CRDDirectoryPaths: []string{crds}, ErrorIfCRDPathMissing: true,
			WebhookInstallOptions: crenvtest.WebhookInstallOptions{Paths: []string{hooks}}}
		cfg, err = e.Start()
		where = operator.WebhookServing{Host: e.WebhookInstallOptions.LocalServingHost, Port: e.WebhookInstallOptions.LocalServingPort, CertDir: e.WebhookInstallOptions.LocalServingCertDir}
		stop = e.Stop
	default:
		return fmt.Errorf("-env %q: want kubeboot or envtest", env)
	}
	if err != nil {
		return err
	}
	res.StartMS = ms(time.Since(start))

	ctx, cancel := context.WithCancel(context.Background())
	c, err := operator.StartManager(ctx, cfg, scheme, where)
	if err != nil {
		cancel()
		_ = stop()
		return err
	}
	suiteStart := time.Now()
	for i := range tests {
		if err := oneTest(ctx, c, fmt.Sprintf("test-%d", i)); err != nil {
			fmt.Fprintf(os.Stderr, "test %d: %v\n", i, err)
			res.FailedTests++
		}
	}
	res.SuiteMS = ms(time.Since(suiteStart))
	res.PeakRSSKiB, res.Processes = peakRSS()
	cancel()
	stopStart := time.Now()
	if err := stop(); err != nil {
		return err
	}
	res.StopMS = ms(time.Since(stopStart))
	return json.NewEncoder(os.Stdout).Encode(res)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// oneTest is one operator test, in namespace ns.
func oneTest(ctx context.Context, c client.Client, ns string) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	site := &v2.Website{ObjectMeta: metav1.ObjectMeta{Name: "site", Namespace: ns},
		Spec: v2.WebsiteSpec{Replicas: 2, Container: v2.Container{Image: "nginx", Port: 8080}}}
	if err := c.Create(ctx, site); err != nil {
		return err
	}
	if err := waitReplicas(ctx, c, ns, 2); err != nil {
		return err
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site-page"}, &corev1.ConfigMap{}); err != nil {
		return fmt.Errorf("the controller's ConfigMap: %w", err)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		old := &v1.Website{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(site), old); err != nil {
			return err
		}
		old.Spec.Replicas = 3
		return c.Update(ctx, old)
	}); err != nil {
		return fmt.Errorf("scaling through v1: %w", err)
	}
	if err := waitReplicas(ctx, c, ns, 3); err != nil {
		return err
	}
	bad := &v2.Website{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: ns},
		Spec: v2.WebsiteSpec{Replicas: operator.MaxReplicas + 1, Container: v2.Container{Image: "nginx"}}}
	if err := c.Create(ctx, bad); !apierrors.IsInvalid(err) {
		return fmt.Errorf("the webhook let %d replicas through: %v", bad.Spec.Replicas, err)
	}
	return c.Delete(ctx, site)
}

func waitReplicas(ctx context.Context, c client.Client, ns string, want int32) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		last = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site"}, d)
		return last == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == want, nil
	})
	if err != nil {
		return fmt.Errorf("Deployment with %d replicas: %w", want, errors.Join(err, last))
	}
	return nil
}

// peakRSS sums the peak resident set (VmHWM) of this process and its
// children.
func peakRSS() (kib, processes int) {
	pids := []int{os.Getpid()}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err == nil && strings.Contains(string(status), "\nPPid:\t"+strconv.Itoa(os.Getpid())+"\n") {
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		if st, err := harness.ProcStatus(pid); err == nil {
			kib += st["VmHWM"]
			processes++
		}
	}
	return kib, processes
}
