package badinput

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeboot/kubeboot/controlplane"
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
			refusedInOneLine(t, tt.want, args...)
		})
	}
}

// TestBadSecretsEncryptStages runs stages out of order on a running
// server: one line naming the cause, and the cluster's configuration
// unchanged. On a server without --secrets-encryption, a stage says so.
func TestBadSecretsEncryptStages(t *testing.T) {
	t.Parallel()
	binary(t)
	srv := startServer(t, func(c *controlplane.Config) { c.SecretsEncryption = true })
	status := func() string {
		t.Helper()
		res := runKubeboot(t, "secrets-encrypt", "status", "--data-dir", srv.DataDir)
		if res.exitCode != 0 {
			t.Fatalf("status: %s", res.stderr)
		}
		return res.stdout
	}
	before := status()
	if !strings.Contains(before, "All hashes match") {
		t.Fatalf("status of a ready server:\n%s", before)
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"rotate before prepare", []string{"rotate"}, "rotate: the cluster is at the stage start; rotate follows prepare"},
		{"reencrypt before rotate", []string{"reencrypt"}, "reencrypt follows rotate or reencrypt_request or reencrypt_active"},
		{"enable when enabled", []string{"enable"}, "Secrets are encrypted already"},
	} {
		refusedInOneLine(t, tt.want, append(append([]string{"secrets-encrypt"}, tt.args...), "--data-dir", srv.DataDir)...)
		if after := status(); after != before {
			t.Errorf("%s changed the status:\n%s\nafter:\n%s", tt.name, before, after)
		}
	}

	plain := startServer(t)
	refusedInOneLine(t, "is the server running, with --secrets-encryption?", "secrets-encrypt", "prepare", "--data-dir", plain.DataDir)
}
