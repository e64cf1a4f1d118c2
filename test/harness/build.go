package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// BinEnv names the environment variable holding a prebuilt kubeboot binary;
// child processes in a network namespace inherit it, since they cannot
// build (no network for the module proxy, and no need).
const BinEnv = "KUBEBOOT_BIN"

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary returns the path of a kubeboot binary: $KUBEBOOT_BIN, or one built
// from this module once per process into dir (which must outlive its use).
func Binary(dir string) (string, error) {
	if p := os.Getenv(BinEnv); p != "" {
		return p, nil
	}
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		out := filepath.Join(dir, "kubeboot")
		cmd := exec.Command("go", "build", "-o", out, "./cmd/kubeboot")
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, b)
			return
		}
		buildPath = out
	})
	return buildPath, buildErr
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the kubeboot module")
	}
	return filepath.Dir(mod), nil
}
