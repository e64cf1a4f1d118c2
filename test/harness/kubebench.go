package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// KubeBenchEnv names the environment variable holding a prebuilt
// kube-bench (CI builds it once, before the tests); without it KubeBench
// builds one.
const KubeBenchEnv = "KUBEBOOT_KUBE_BENCH"

var (
	kubeBenchOnce sync.Once
	kubeBenchPath string
	kubeBenchErr  error
)

// KubeBench returns the path of kube-bench, the CIS benchmark's auditor:
// $KUBEBOOT_KUBE_BENCH, or the version hack/kube-bench pins, built once
// per test binary into the user's cache directory (kept for later runs:
// its module graph is kube-bench's own, not kubeboot's). A test that
// runs itself again in a network namespace sets $KUBEBOOT_KUBE_BENCH
// for it first: the namespace has no network to build in.
func KubeBench() (string, error) {
	if p := os.Getenv(KubeBenchEnv); p != "" {
		return p, nil
	}
	kubeBenchOnce.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			kubeBenchErr = err
			return
		}
		cache, err := os.UserCacheDir()
		if err != nil {
			kubeBenchErr = err
			return
		}
		kubeBenchPath, kubeBenchErr = goBuild(filepath.Join(root, "hack", "kube-bench"), filepath.Join(cache, "kubeboot-test", "kube-bench"), "github.com/aquasecurity/kube-bench")
	})
	return kubeBenchPath, kubeBenchErr
}

// KubeBenchConfig copies kubeboot's kube-bench profile
// (hack/kube-bench/cfg) to dir with its paths, written for the default
// data directories of root (/var/lib/kubeboot, an agent's
// /var/lib/kubeboot/agent), made the test's: as an operator whose
// --data-dir is not the default adapts it. It returns the copy's
// directory, for kube-bench's --config-dir.
func KubeBenchConfig(dir, dataDir, agentDir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	from := filepath.Join(root, "hack", "kube-bench", "cfg")
	paths := strings.NewReplacer("/var/lib/kubeboot/agent", agentDir, "/var/lib/kubeboot", dataDir)
	err = filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dir, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, []byte(paths.Replace(string(data))), 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("copying the kube-bench profile: %w", err)
	}
	return dir, nil
}
