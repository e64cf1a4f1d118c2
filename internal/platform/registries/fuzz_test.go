package registries

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzRead: any registries.yaml is read and checked, or refused with an
// error naming the file; what is taken gives containerd's hosts files and
// the rewrites without a panic.
func FuzzRead(f *testing.F) {
	for _, s := range []string{
		"mirrors:\n  docker.io:\n    endpoint: [\"https://mirror.test:5000\"]\n    rewrite:\n      \"^library/(.*)\": \"mirrored/$1\"\n",
		"mirrors:\n  \"*\":\n    endpoint: [\"http://plain.test/v2/prefix\"]\nconfigs:\n  private.test:\n    auth: {username: u, password: p}\n    tls: {insecure_skip_verify: true}\n",
		"mirrors:\n  docker.io:\n    endpoint: [\"ftp://x\"]\n",
		"mirrors:\n  docker.io:\n    rewrite:\n      \"(\": x\n",
		"configs: {a: {tls: {ca_file: /nonexistent}}}\n",
		"mirrors: [\n", "",
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "registries.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Read(path, true)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Errorf("Read(%q): the error does not name the file: %v", data, err)
			}
			return
		}
		_, _ = r.HostsFiles(nil)
		_, _ = r.Rewrites()
		_ = r.Auths()
	})
}
