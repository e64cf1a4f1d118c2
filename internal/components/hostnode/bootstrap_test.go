package hostnode

import (
	"os"
	"path/filepath"
	"testing"

	kubeconfigutil "k8s.io/kubernetes/cmd/kubeadm/app/util/kubeconfig"

	"github.com/kubeboot/kubeboot/controlplane"
)

// TestTokenIn: a start reuses the bootstrap token of the kubeconfig it
// wrote before, and makes a new one for anything else.
func TestTokenIn(t *testing.T) {
	dir := t.TempDir()
	write := func(name, user, token string) string {
		path := filepath.Join(dir, name)
		if err := kubeconfigutil.WriteToDisk(path, kubeconfigutil.CreateWithToken("https://127.0.0.1:6443", controlplane.ClusterName, user, []byte("ca"), token)); err != nil {
			t.Fatal(err)
		}
		return path
	}
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("{not yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
		wantErr          bool
	}{
		{"none yet", filepath.Join(dir, "missing"), "", false},
		{"a bootstrap token", write("ok", bootstrapUser, "abcdef.0123456789abcdef"), "abcdef.0123456789abcdef", false},
		{"not a bootstrap token", write("other", bootstrapUser, "not-a-token"), "", false},
		{"another user's", write("user", "someone", "abcdef.0123456789abcdef"), "", false},
		{"not a kubeconfig", garbage, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tokenIn(tc.path)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("tokenIn = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
