package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KubeBenchEnv names the environment variable holding a prebuilt
// kube-bench (CI builds it once, before the tests); without it KubeBench
// builds one.
const KubeBenchEnv = "KUBEBOOT_KUBE_BENCH"

// KubeBench returns the path of kube-bench, the CIS benchmark's auditor:
// $KUBEBOOT_KUBE_BENCH, or the version hack/kube-bench pins, built into
// the user's cache directory (kept for later runs: its module graph is
// kube-bench's own, not kubeboot's).
func KubeBench() (string, error) {
	if p := os.Getenv(KubeBenchEnv); p != "" {
		return p, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return goBuild(filepath.Join(root, "hack", "kube-bench"), filepath.Join(cache, "kubeboot-test", "kube-bench"), "github.com/aquasecurity/kube-bench")
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
