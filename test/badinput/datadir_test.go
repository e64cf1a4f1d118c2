package badinput

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
	"github.com/kubeboot/kubeboot/test/harness"
)

// TestBadDataDir starts kubeboot on data dirs it must not use: one it
// cannot read, a file, and directories holding another program's files
// where kubeboot keeps its own (etcd data, the CA). Each must be refused
// with one clear line naming the path and a non-zero exit, and nothing in
// or next to the data dir may change: no file rewritten (contents, mode
// and mod time compared), none added, none removed.
func TestBadDataDir(t *testing.T) {
	t.Parallel()
	binary(t) // build once, before the subtests start in parallel

	// garbage is deterministic junk the size of a small bbolt file.
	garbage := bytes.Repeat([]byte("not an etcd file \x00\xff\x13\x37 "), 2048)
	foreignCACert, foreignCAKey := newCA(t, "someone-elses-ca")

	tests := []struct {
		name string
		// prepare makes dataDir (which does not exist yet) the way the
		// case needs it.
		prepare func(t *testing.T, dataDir string)
		// skipAsRoot, when set, says why the case is skipped for root.
		skipAsRoot string
	}{
		{
			name: "data dir is a file",
			prepare: func(t *testing.T, dataDir string) {
				writeFile(t, dataDir, []byte("a file, not a directory\n"), 0o644)
			},
		},
		{
			name: "data dir unreadable",
			prepare: func(t *testing.T, dataDir string) {
				writeFile(t, filepath.Join(dataDir, "etcd", "member", "snap", "db"), garbage, 0o600)
				if err := os.Chmod(dataDir, 0); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.Chmod(dataDir, 0o700) }) // so TempDir can remove it
			},
			skipAsRoot: "running as root: permission bits do not stop root from reading or writing a chmod 000 directory",
		},
		{
			name: "etcd db is garbage",
			prepare: func(t *testing.T, dataDir string) {
				writeFile(t, filepath.Join(dataDir, "etcd", "member", "snap", "db"), garbage, 0o600)
			},
		},
		{
			name: "etcd wal is garbage",
			prepare: func(t *testing.T, dataDir string) {
				writeFile(t, filepath.Join(dataDir, "etcd", "member", "wal", "0000000000000000-0000000000000000.wal"), garbage, 0o600)
			},
		},
		{
			name: "pki/ca.crt is not a certificate",
			prepare: func(t *testing.T, dataDir string) {
				writeFile(t, filepath.Join(dataDir, "pki", "ca.crt"), []byte("# my notes, not a certificate\n"), 0o644)
			},
		},
		{
			name: "pki/ca.crt is not a certificate, ca.key present",
			prepare: func(t *testing.T, dataDir string) {
				writeFile(t, filepath.Join(dataDir, "pki", "ca.crt"), []byte("# my notes, not a certificate\n"), 0o644)
				writeFile(t, filepath.Join(dataDir, "pki", "ca.key"), foreignCAKey, 0o600)
			},
		},
		{
			name: "pki/ca.key is not a key",
			prepare: func(t *testing.T, dataDir string) {
				writeFile(t, filepath.Join(dataDir, "pki", "ca.crt"), foreignCACert, 0o644)
				writeFile(t, filepath.Join(dataDir, "pki", "ca.key"), []byte("-----BEGIN EC PRIVATE KEY-----\nZ2FyYmFnZQ==\n-----END EC PRIVATE KEY-----\n"), 0o600)
			},
		},
		{
			name: "audit/policy.yaml edited into no policy",
			prepare: func(t *testing.T, dataDir string) {
				writeFile(t, filepath.Join(dataDir, "audit", "policy.yaml"), []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n"), 0o600)
			},
		},
		{
			name: "a later kubeboot's storage",
			prepare: func(t *testing.T, dataDir string) {
				writeFile(t, filepath.Join(dataDir, "storage-version"), []byte(`{"storageVersion":99,"kubernetes":"1.37.2","kubeboot":"9.0.0"}`+"\n"), 0o600)
			},
		},
		{
			name: "a later Kubernetes minor's data",
			prepare: func(t *testing.T, dataDir string) {
				writeFile(t, filepath.Join(dataDir, "storage-version"), []byte(`{"storageVersion":1,"kubernetes":"1.99.0","kubeboot":"9.0.0"}`+"\n"), 0o600)
			},
		},
		{
			name: "pki/ca.crt of another CA without its key",
			prepare: func(t *testing.T, dataDir string) {
				writeFile(t, filepath.Join(dataDir, "pki", "ca.crt"), foreignCACert, 0o644)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.skipAsRoot != "" && os.Geteuid() == 0 {
				t.Skip(tt.skipAsRoot)
			}
			root := t.TempDir()
			dataDir := filepath.Join(root, "data")
			tt.prepare(t, dataDir)
			// Old mod times, so that a rewrite within the same clock tick
			// still shows.
			backdate(t, root)
			before := treeState(t, root)

			res := runKubeboot(t, apiserverArgs(dataDir)...)

			if !res.started {
				if res.exitCode == 0 {
					t.Errorf("exit 0, want non-zero\nstderr:\n%s", res.stderr)
				}
				lines := stderrLines(res.stderr)
				if len(lines) != 1 {
					t.Errorf("%d lines on stderr, want exactly 1:\n%s", len(lines), tail(res.stderr, 3000))
				} else if !strings.Contains(lines[0], dataDir) {
					t.Errorf("the line does not name the data dir %s: %s", dataDir, lines[0])
				}
			}
			if diff := compareTrees(before, treeState(t, root)); len(diff) > 0 {
				t.Errorf("the data dir changed:\n  %s", strings.Join(diff, "\n  "))
			}
		})
	}
}

// TestDataDirRestart is the control case: a data dir kubeboot made itself
// serves again after a clean stop, with the same CA and certificates and
// the objects stored before.
func TestDataDirRestart(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()

	first := harness.StartAPIServer(t, bin, dataDir, serveFlags()...)
	if err := first.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	client := first.MustClient(t)
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "survivor"}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pki := treeState(t, filepath.Join(dataDir, "pki"))
	if _, ok := pki["ca.crt"]; !ok {
		t.Fatalf("no pki/ca.crt after the first start; pki holds %v", keys(pki))
	}
	if err := first.Terminate(10 * time.Second); err != nil {
		t.Fatalf("first run, SIGTERM: %v (want exit 0)\n%s", err, first.Logs())
	}

	second := harness.StartAPIServer(t, bin, dataDir, serveFlags()...)
	if err := second.WaitReady(ctx); err != nil {
		t.Fatalf("restart on kubeboot's own data dir: %v", err)
	}
	if diff := compareTrees(pki, treeState(t, filepath.Join(dataDir, "pki"))); len(diff) > 0 {
		t.Errorf("the restart replaced certificates:\n  %s", strings.Join(diff, "\n  "))
	}
	client = second.MustClient(t)
	cm, err := client.CoreV1().ConfigMaps("default").Get(ctx, "survivor", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if cm.Data["k"] != "v" {
		t.Errorf("after the restart, ConfigMap survivor holds %v", cm.Data)
	}
	if err := second.Terminate(10 * time.Second); err != nil {
		t.Errorf("second run, SIGTERM: %v (want exit 0)", err)
	}
}

// fileState is what compareTrees compares of one path.
type fileState struct {
	mode    fs.FileMode
	size    int64
	modTime time.Time // files only: directories change theirs when an entry comes and goes, which the entry itself shows
	sha256  string    // files only
	target  string    // symlinks only
}

// treeState records every path under root (root itself as ".").
func treeState(t *testing.T, root string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			// An unreadable directory: record it, do not descend.
			if d != nil && d.IsDir() && path != root {
				return fs.SkipDir
			}
			if path == root {
				return err
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		info, err := os.Lstat(path)
		if err != nil {
			return err
		}
		st := fileState{mode: info.Mode()}
		switch {
		case info.Mode().IsRegular():
			st.size, st.modTime = info.Size(), info.ModTime()
			b, err := os.ReadFile(path)
			if err != nil {
				st.sha256 = "unreadable: " + err.Error()
			} else {
				sum := sha256.Sum256(b)
				st.sha256 = hex.EncodeToString(sum[:])
			}
		case info.Mode()&fs.ModeSymlink != 0:
			st.target, _ = os.Readlink(path)
		}
		out[rel] = st
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return out
}

// compareTrees lists what differs between two treeStates, sorted.
func compareTrees(before, after map[string]fileState) []string {
	var out []string
	for p, a := range after {
		b, ok := before[p]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("added %s (%v)", p, a.mode))
		case a.mode != b.mode:
			out = append(out, fmt.Sprintf("mode of %s changed: %v -> %v", p, b.mode, a.mode))
		case a.sha256 != b.sha256 || a.size != b.size:
			out = append(out, fmt.Sprintf("contents of %s changed", p))
		case !a.modTime.Equal(b.modTime):
			out = append(out, fmt.Sprintf("mod time of %s changed: %s -> %s", p, b.modTime.Format(time.RFC3339Nano), a.modTime.Format(time.RFC3339Nano)))
		case a.target != b.target:
			out = append(out, fmt.Sprintf("symlink %s now points to %s", p, a.target))
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			out = append(out, "removed "+p)
		}
	}
	sort.Strings(out)
	return out
}

// backdate sets the mod time of every regular file under root an hour
// back.
func backdate(t *testing.T, root string) {
	t.Helper()
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if err := os.Chtimes(path, old, old); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
}

// writeFile writes data to path with perm, creating parents (0700).
func writeFile(t *testing.T, path string, data []byte, perm fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, perm); err != nil {
		t.Fatal(err)
	}
}

// newCA returns a new self-signed CA certificate and its key, PEM encoded.
func newCA(t testing.TB, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	ca, err := pki.EnsureCA(t.TempDir(), cn)
	if err != nil {
		t.Fatal(err)
	}
	return ca.CertPEM, ca.KeyPEM
}

func keys(m map[string]fileState) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
