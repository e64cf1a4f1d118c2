// Package kubebench audits kubeboot with kube-bench, the CIS Kubernetes
// Benchmark's auditor, on kubeboot's profile (hack/kube-bench): a
// `kubeboot server --node` and an agent at their defaults must show no
// scored FAIL, and a setting made bad must show as the FAIL of its check.
package kubebench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeboot/kubeboot/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// benchmark is the profile's benchmark (hack/kube-bench/overlay.yaml).
const benchmark = "kubeboot-cis-1.12"

// result is one check's result in kube-bench's --json report.
type result struct {
	ID       string `json:"test_number"`
	Text     string `json:"test_desc"`
	Status   string `json:"status"`
	Scored   bool   `json:"scored"`
	Actual   string `json:"actual_value"`
	Expected string `json:"expected_result"`
	Reason   string `json:"reason"`
}

// report is kube-bench's --json report.
type report struct {
	Controls []struct {
		ID    string `json:"id"`
		Tests []struct {
			Results []result `json:"results"`
		} `json:"tests"`
	} `json:"Controls"`
}

// bench runs kube-bench's targets of the profile (copied to the test's
// data directories) and returns its results by check id.
func bench(t *testing.T, dataDir, agentDir string, targets ...string) map[string]result {
	t.Helper()
	kubeBench, err := harness.KubeBench()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := harness.KubeBenchConfig(t.TempDir(), dataDir, agentDir)
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := harness.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kubeBench, "run", "--config-dir", cfg, "--benchmark", benchmark, "--targets", strings.Join(targets, ","), "--json")
	// The policies' checks ask the cluster with kubectl, as its admin.
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(kubectl)+":"+os.Getenv("PATH"), "KUBECONFIG="+filepath.Join(dataDir, "admin.kubeconfig"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kube-bench %v: %v\n%s", targets, err, stderr.String())
	}
	var r report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("kube-bench's report: %v\n%s", err, out)
	}
	results := map[string]result{}
	for _, c := range r.Controls {
		for _, g := range c.Tests {
			for _, res := range g.Results {
				results[res.ID] = res
			}
		}
	}
	if len(results) == 0 {
		t.Fatalf("kube-bench %v checked nothing:\n%s\n%s", targets, out, stderr.String())
	}
	return results
}

// requireNoScoredFail fails the test for each check that failed (a
// failed check that is not scored is a WARN), and logs the checks by
// status.
func requireNoScoredFail(t *testing.T, results map[string]result) {
	t.Helper()
	byStatus := map[string][]string{}
	var ids []string
	for id := range results {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := results[id]
		byStatus[r.Status] = append(byStatus[r.Status], id)
		if r.Status == "FAIL" {
			t.Errorf("%s FAIL: %s: got %q, want %s %s", id, r.Text, r.Actual, r.Expected, r.Reason)
		}
	}
	for _, status := range []string{"PASS", "FAIL", "WARN", "INFO"} {
		t.Logf("kube-bench %s: %d: %s", status, len(byStatus[status]), strings.Join(byStatus[status], " "))
	}
}

// requireFail fails the test unless check id failed.
func requireFail(t *testing.T, results map[string]result, id string) {
	t.Helper()
	if r, ok := results[id]; !ok || r.Status != "FAIL" {
		t.Errorf("check %s: %+v, want FAIL", id, r)
	}
}

// waitFile waits until path exists: what the node publishes once its
// parts start.
func waitFile(t *testing.T, path string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		_, err := os.Stat(path)
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("%s never appeared", path)
	}
}

// inNetNS builds what the test runs and then runs it again in a network
// namespace with addr (harness.InNetNS), which has no network for the
// modules; it returns the binary in the namespace, and false outside it.
func inNetNS(t *testing.T, addr string) (string, bool) {
	t.Helper()
	kubeBench, err := harness.KubeBench()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(harness.KubeBenchEnv, kubeBench)
	if _, err := harness.Kubectl(); err != nil {
		t.Fatal(err)
	}
	if !harness.InNetNS(t, addr) {
		return "", false
	}
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	return bin, true
}

// TestServerNode audits a `kubeboot server --node` at its defaults: every
// target of the benchmark.
func TestServerNode(t *testing.T) {
	addr := harness.Addr(0)
	bin, ok := inNetNS(t, addr)
	if !ok {
		return
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	harness.StartReadyServer(t, 2*time.Minute, bin, dataDir, harness.NodeServerArgs(t, addr, harness.StartFakeCRI(t))...)
	node := harness.NodeDir(dataDir)
	waitFile(t, filepath.Join(node, "flags", "kube-proxy"))

	results := bench(t, dataDir, filepath.Join(dataDir, "no-agent"), "master", "node", "controlplane", "etcd", "policies")
	requireNoScoredFail(t, results)

	t.Run("a world-readable admin kubeconfig fails 1.1.13", func(t *testing.T) {
		admin := filepath.Join(dataDir, "admin.kubeconfig")
		if err := os.Chmod(admin, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(admin, 0o600)
		requireFail(t, bench(t, dataDir, "", "master"), "1.1.13")
	})
}

// TestAgent audits an agent at its defaults: the node target.
func TestAgent(t *testing.T) {
	addr := harness.Addr(0)
	bin, ok := inNetNS(t, addr)
	if !ok {
		return
	}
	serverDir := filepath.Join(t.TempDir(), "server")
	harness.StartReadyServer(t, 2*time.Minute, bin, serverDir, "--bind-address", addr, "--secure-port", "6443", "--service-cluster-ip-range", "10.96.0.0/16")
	token, err := os.ReadFile(filepath.Join(serverDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	agentDir := filepath.Join(t.TempDir(), "agent")
	harness.StartAgent(t, bin, agentDir, append([]string{"--server", "https://" + addr + ":6443", "--token", strings.TrimSpace(string(token)), "--node-ip", addr},
		harness.NodeArgs(t, harness.StartFakeCRI(t))...)...)
	waitFile(t, filepath.Join(agentDir, "flags", "kube-proxy"))
	noServer := filepath.Join(serverDir, "not-this-host")
	requireNoScoredFail(t, bench(t, noServer, agentDir, "node"))

	t.Run("a world-readable kubelet kubeconfig fails 4.1.5", func(t *testing.T) {
		kubeconfig := filepath.Join(agentDir, "kubelet.kubeconfig")
		if err := os.Chmod(kubeconfig, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(kubeconfig, 0o600)
		requireFail(t, bench(t, noServer, agentDir, "node"), "4.1.5")
	})
}

// TestBadSettings audits a server given settings the benchmark fails:
// each shows as the FAIL of its check.
func TestBadSettings(t *testing.T) {
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	harness.StartReadyServer(t, time.Minute, bin, dataDir, "--secure-port", "0",
		"--profiling=true", "--authorization-mode=AlwaysAllow", "--audit-log-maxage=7", "--enable-admission-plugins=AlwaysAdmit",
		"--controller-manager-arg=--profiling=true", "--scheduler-arg=--profiling=true")
	results := bench(t, dataDir, "", "master")
	for _, id := range []string{"1.2.6", "1.2.8", "1.2.10", "1.2.15", "1.2.17", "1.3.2", "1.4.1"} {
		requireFail(t, results, id)
	}
}
