package server

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestKubeletRefusesClearly: `kubeboot kubelet` on a host that cannot run
// it (here: no CRI runtime at the endpoint it is given, on any host) exits
// non-zero at once with one line saying why, instead of upstream's
// configuration dump and a failed dial.
func TestKubeletRefusesClearly(t *testing.T) {
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "unix://" + filepath.Join(t.TempDir(), "no-runtime.sock")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "kubelet", "--container-runtime-endpoint", endpoint, "--root-dir", t.TempDir())
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	if _, ok := err.(*exec.ExitError); !ok {
		t.Fatalf("kubeboot kubelet without a runtime: %v, want a non-zero exit", err)
	}
	out := strings.TrimSpace(stdout.String() + stderr.String())
	if strings.Contains(out, "\n") || !strings.Contains(out, "this host cannot run the kubelet") || !strings.Contains(out, endpoint) {
		t.Errorf("kubeboot kubelet printed:\n%s\nwant one line saying the host cannot run it, naming %s", out, endpoint)
	}
	t.Logf("refused in %s: %s", time.Since(start), out)
}
