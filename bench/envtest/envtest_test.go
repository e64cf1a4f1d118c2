//go:build linux

// Package envtest benchmarks kubeboot's envtest (kubeboottest/envtest), the
// harness operator authors switch to from controller-runtime's envtest.
//
// BenchmarkHarness, in this process: Start with 10 CRDs installed
// (established and in discovery), Stop, Reset after a test's worth of
// writes, and the resident memory each extra server in one test binary
// costs.
//
//	go test ./bench/envtest -run '^$' -bench Harness -benchtime 10x
//
// BenchmarkSuite: the sample operator's 50-test suite (bench/envtest/suite)
// on kubeboot's envtest and on controller-runtime's envtest driving
// kube-apiserver 1.37.2 and etcd 3.7.3 built from this module's graph,
// alternating, each run a fresh process: wall time (exec to exit), the
// phases, and the peak RSS of the suite's processes summed.
//
//	go test ./bench/envtest -run '^$' -bench Suite -benchtime 3x -timeout 30m
package envtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/bench/internal/benchserver"
	"github.com/kubeboot/kubeboot/kubeboottest/envtest"
	"github.com/kubeboot/kubeboot/test/harness"
)

const crdTemplate = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: kind%[1]ds.bench.kubeboot.test
spec:
  group: bench.kubeboot.test
  names: {kind: Kind%[1]d, plural: kind%[1]ds, singular: kind%[1]d, listKind: Kind%[1]dList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer, minimum: 0}
              image: {type: string}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`

func crdDir(b *testing.B, n int) string {
	dir := b.TempDir()
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("kind%d.yaml", i)), fmt.Appendf(nil, crdTemplate, i), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func BenchmarkHarness(b *testing.B) {
	dir := crdDir(b, 10)
	ctx := context.Background()
	var starts, stops, resets []float64
	for b.Loop() {
		env := &envtest.Environment{CRDDirectoryPaths: []string{dir}, ErrorIfCRDPathMissing: true}
		t0 := time.Now()
		cfg, err := env.Start()
		if err != nil {
			b.Fatal(err)
		}
		starts = append(starts, float64(time.Since(t0).Microseconds())/1000)
		if len(env.CRDs) != 10 {
			b.Fatalf("%d CRDs installed, want 10", len(env.CRDs))
		}
		// A test's worth of writes: a namespace, 20 ConfigMaps, an edit.
		client := kubernetes.NewForConfigOrDie(cfg)
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t"}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		for i := range 20 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i)}}
			if _, err := client.CoreV1().ConfigMaps("t").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		t0 = time.Now()
		if err := env.Reset(ctx); err != nil {
			b.Fatal(err)
		}
		resets = append(resets, float64(time.Since(t0).Microseconds())/1000)
		t0 = time.Now()
		if err := env.Stop(); err != nil {
			b.Fatal(err)
		}
		stops = append(stops, float64(time.Since(t0).Microseconds())/1000)
	}
	b.ReportMetric(median(starts), "start-ms")
	b.ReportMetric(median(resets), "reset-ms")
	b.ReportMetric(median(stops), "stop-ms")

	// Memory: one server, then three more in the same process.
	var envs []*envtest.Environment
	defer func() {
		for _, e := range envs {
			_ = e.Stop()
		}
	}()
	startOne := func() {
		env := &envtest.Environment{CRDDirectoryPaths: []string{dir}}
		if _, err := env.Start(); err != nil {
			b.Fatal(err)
		}
		envs = append(envs, env)
	}
	startOne()
	time.Sleep(3 * time.Second)
	one := benchserver.MemoryOf(b, os.Getpid()).RSS
	for range 3 {
		startOne()
	}
	time.Sleep(3 * time.Second)
	four := benchserver.MemoryOf(b, os.Getpid()).RSS
	b.ReportMetric((four-one)/3, "extra-server-rss-MiB")
}

type suiteResult struct {
	Env         string  `json:"env"`
	StartMS     float64 `json:"start_ms"`
	SuiteMS     float64 `json:"suite_ms"`
	StopMS      float64 `json:"stop_ms"`
	PeakRSSKiB  int     `json:"peak_rss_kib"`
	FailedTests int     `json:"failed_tests"`
	WallMS      float64
}

func BenchmarkSuite(b *testing.B) {
	bin := b.TempDir()
	suite, err := harness.BuildCommand(filepath.Join(bin, "suite"), "github.com/kubeboot/kubeboot/bench/envtest/suite")
	if err != nil {
		b.Fatal(err)
	}
	// envtest's assets, from this module's graph: what setup-envtest
	// would download.
	assets := filepath.Join(bin, "assets")
	for name, pkg := range map[string]string{"kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver", "etcd": "go.etcd.io/etcd/server/v3", "kubectl": "k8s.io/kubernetes/cmd/kubectl"} {
		if _, err := harness.BuildCommand(filepath.Join(assets, name), pkg); err != nil {
			b.Fatal(err)
		}
	}
	config, err := filepath.Abs(filepath.Join("..", "..", "test", "operator", "config"))
	if err != nil {
		b.Fatal(err)
	}
	run := func(env string) suiteResult {
		cmd := exec.Command(suite, "-env", env, "-tests", "50", "-config", config)
		cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS="+assets)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		t0 := time.Now()
		out, err := cmd.Output()
		wall := time.Since(t0)
		if err != nil {
			b.Fatalf("suite on %s: %v\n%s", env, err, tail(stderr.String()))
		}
		var r suiteResult
		if err := json.Unmarshal(out, &r); err != nil {
			b.Fatalf("suite on %s printed %q: %v", env, out, err)
		}
		if r.FailedTests > 0 {
			b.Fatalf("suite on %s: %d tests failed\n%s", env, r.FailedTests, tail(stderr.String()))
		}
		r.WallMS = float64(wall.Microseconds()) / 1000
		b.Logf("%s: wall %.0f ms (start %.0f, 50 tests %.0f, stop %.0f), peak RSS %.1f MiB",
			env, r.WallMS, r.StartMS, r.SuiteMS, r.StopMS, float64(r.PeakRSSKiB)/1024)
		return r
	}
	results := map[string][]suiteResult{}
	for b.Loop() {
		for _, env := range []string{"kubeboot", "envtest"} {
			results[env] = append(results[env], run(env))
		}
	}
	metric := func(env string, f func(suiteResult) float64) float64 {
		var xs []float64
		for _, r := range results[env] {
			xs = append(xs, f(r))
		}
		return median(xs)
	}
	wall := func(r suiteResult) float64 { return r.WallMS }
	rss := func(r suiteResult) float64 { return float64(r.PeakRSSKiB) / 1024 }
	start := func(r suiteResult) float64 { return r.StartMS }
	b.ReportMetric(metric("kubeboot", wall), "kubeboot-wall-ms")
	b.ReportMetric(metric("envtest", wall), "envtest-wall-ms")
	b.ReportMetric(metric("kubeboot", wall)/metric("envtest", wall), "wall-ratio")
	b.ReportMetric(metric("kubeboot", start), "kubeboot-start-ms")
	b.ReportMetric(metric("envtest", start), "envtest-start-ms")
	b.ReportMetric(metric("kubeboot", rss), "kubeboot-peak-MiB")
	b.ReportMetric(metric("envtest", rss), "envtest-peak-MiB")
	b.ReportMetric(metric("kubeboot", rss)/metric("envtest", rss), "peak-ratio")
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}
