package badinput

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeboot/kubeboot/internal/platform/clusterjoin"
)

// TestBadSecretsEncryptCommands runs `kubeboot secrets-encrypt` with one
// mistake each, without a running server: one line on stderr naming the
// cause.
func TestBadSecretsEncryptCommands(t *testing.T) {
	t.Parallel()
	binary(t)
	dataDir := t.TempDir()
	if _, err := clusterjoin.EnsureToken(filepath.Join(dataDir, "token"), []byte("a CA's PEM")); err != nil {
		t.Fatal(err)
	}
	writeUnreachableAdminKubeconfig(t, dataDir)
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"status without a running server", []string{"status"}, "connection refused"},
		{"prepare without a running server", []string{"prepare"}, "connection refused"},
		{"rotate-keys on a data dir that is not there", []string{"rotate-keys", "--data-dir", missing}, "--data-dir " + missing},
		{"a stage with no time to wait", []string{"rotate", "--timeout=0s"}, "--timeout 0s must be positive"},
		{"a stage with an argument", []string{"reencrypt", "now"}, `unknown command "now"`},
		{"an unknown stage", []string{"finish"}, `unknown command "finish"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"secrets-encrypt"}, tt.args...)
			if !strings.Contains(strings.Join(args, " "), "--data-dir") {
				args = append(args, "--data-dir", dataDir)
			}
			res := runKubeboot(t, args...)
			lines := stderrLines(res.stderr)
			if res.exitCode == 0 || len(lines) != 1 || !strings.Contains(res.stderr, tt.want) {
				t.Errorf("kubeboot %s: exit %d, stderr %q; want one line saying %q", strings.Join(args, " "), res.exitCode, res.stderr, tt.want)
			}
		})
	}
}
