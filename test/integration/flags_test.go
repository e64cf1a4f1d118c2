package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestBadStartRefusedWithoutWriting checks that a start kube-apiserver
// would refuse exits non-zero with one clear line, before anything is
// written to the data directory.
func TestBadStartRefusedWithoutWriting(t *testing.T) {
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{
			name: "range family differs from advertise address",
			args: []string{"--advertise-address", "198.51.100.1", "--service-cluster-ip-range", "fd00::/108"},
			want: `service IP family "fd00::/108" must match public address family "198.51.100.1"`,
		},
		{
			name: "malformed range",
			args: []string{"--advertise-address", "198.51.100.1", "--service-cluster-ip-range", "10.0.0.0/33"},
			want: "--service-cluster-ip-range",
		},
		{
			name: "range too large",
			args: []string{"--advertise-address", "198.51.100.1", "--service-cluster-ip-range", "10.0.0.0/8"},
			want: "the mask must be >= 12",
		},
		{
			name: "bad port type",
			args: []string{"--secure-port", "https"},
			want: `invalid argument "https" for "--secure-port" flag`,
		},
		{
			name: "unknown reconciler",
			args: []string{"--advertise-address", "198.51.100.1", "--endpoint-reconciler-type", "magic"},
			want: `--endpoint-reconciler-type "magic"`,
		},
		{
			name: "node port range reversed",
			args: []string{"--advertise-address", "198.51.100.1", "--service-node-port-range", "32767-30000"},
			want: "--service-node-port-range",
		},
		{
			name: "loopback advertise address",
			args: []string{"--advertise-address", "127.0.0.1"},
			want: "--advertise-address 127.0.0.1 must be a specific, non-loopback address",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			args := append([]string{"apiserver", "--data-dir", dir, "--bind-address", "127.0.0.1", "--secure-port", "0"}, tt.args...)
			out, err := exec.Command(bin, args...).CombinedOutput()
			if err == nil {
				t.Fatalf("kubeboot %v exited 0; output:\n%s", args, out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("output does not contain %q:\n%s", tt.want, out)
			}
			if lines := strings.Count(strings.TrimSpace(string(out)), "\n") + 1; lines != 1 {
				t.Errorf("want one line, got %d:\n%s", lines, out)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("data directory was created (%v)", err)
			}
		})
	}
}
