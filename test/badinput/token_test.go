package badinput

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeboot/kubeboot/internal/platform/clusterjoin"
)

// TestBadTokenCommands runs `kubeboot token` with one mistake each,
// without a running server: one line on stderr naming the cause, and the
// data dir's token unchanged.
func TestBadTokenCommands(t *testing.T) {
	t.Parallel()
	binary(t)
	dataDir := t.TempDir()
	token, err := clusterjoin.EnsureToken(filepath.Join(dataDir, "token"), []byte("a CA's PEM"))
	if err != nil {
		t.Fatal(err)
	}
	writeUnreachableAdminKubeconfig(t, dataDir)
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"create on a data dir without a token", []string{"create", "--data-dir", missing}, "--data-dir " + missing},
		{"create a malformed token", []string{"create", "ABCDEF.0123456789abcdef"}, "TOKEN"},
		{"create with a negative TTL", []string{"create", "--ttl=-1h"}, "--ttl"},
		{"create with an unknown usage", []string{"create", "--usages=signing,everything"}, "--usages"},
		{"create with a group outside system:bootstrappers", []string{"create", "--groups=system:masters"}, "--groups"},
		{"create without a running server", []string{"create"}, "connection refused"},
		{"list without a running server", []string{"list"}, "connection refused"},
		{"list with a kubeconfig that is not there", []string{"list", "--kubeconfig", missing}, "--kubeconfig " + missing},
		{"delete what is not a token", []string{"delete", "not-a-token"}, `"not-a-token" is not a bootstrap token`},
		{"rotate without a new token", []string{"rotate"}, "--new-token is required"},
		{"rotate to a short password", []string{"rotate", "--new-token", "short"}, "--new-token: the password is shorter than 16"},
		{"rotate to another cluster's token", []string{"rotate", "--new-token", "K10" + strings.Repeat("0", 64) + "::server:a-long-enough-password"}, "--new-token: the token's CA hash"},
		{"rotate from a wrong token", []string{"rotate", "--token", "wrong", "--new-token", "a-long-enough-password"}, "--token is not the cluster's current server token"},
		{"rotate without a running server", []string{"rotate", "--new-token", "a-long-enough-password"}, "connection refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"token"}, tt.args...)
			if !strings.Contains(strings.Join(args, " "), "--data-dir") {
				args = append(args, "--data-dir", dataDir)
			}
			refusedInOneLine(t, tt.want, args...)
			if got, err := clusterjoin.ReadToken(filepath.Join(dataDir, "token")); err != nil || got != token {
				t.Errorf("the token changed: %+v, %v", got, err)
			}
			if _, err := os.Stat(missing); !os.IsNotExist(err) {
				t.Errorf("%s was created", missing)
			}
		})
	}
}
