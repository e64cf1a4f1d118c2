package configfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestApplyConfigFile(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := file("good.yaml", `
data-dir: /srv/kubeboot
secure-port: 7443
etcd-quota-backend-bytes: 34359738368
kubelet-arg: [--max-pods=200, --v=2]
feature-gates: {B: false, A: true}
`)
	tests := []struct {
		name    string
		args    []string
		want    map[string]string // flag: value after
		warning string            // in a warning, if set
		err     string            // in the error, if set
	}{
		{name: "file values", args: []string{"--config", good},
			want: map[string]string{"data-dir": "/srv/kubeboot", "secure-port": "7443", "etcd-quota-backend-bytes": "34359738368",
				"kubelet-arg": "[--max-pods=200,--v=2]", "feature-gates": "A=true,B=false"}},
		{name: "flags win", args: []string{"--config", good, "--secure-port=6443", "--data-dir=/srv/kubeboot"},
			want: map[string]string{"secure-port": "6443", "data-dir": "/srv/kubeboot"}, warning: "--secure-port=6443 on the command line wins over 7443 in --config " + good},
		{name: "unknown key", args: []string{"--config", file("unknown.yaml", "data-dir: /x\nsecure-prot: 1\n")}, err: `unknown key "secure-prot"`},
		{name: "not YAML", args: []string{"--config", file("bad.yaml", "data-dir: [\n")}, err: "bad.yaml: not a YAML map"},
		{name: "not a map", args: []string{"--config", file("list.yaml", "- data-dir\n")}, err: "list.yaml: not a YAML map"},
		{name: "a key twice", args: []string{"--config", file("twice.yaml", "secure-port: 1\nsecure-port: 2\n")}, err: "twice.yaml"},
		{name: "a list for one value", args: []string{"--config", file("list-value.yaml", "secure-port: [1, 2]\n")}, err: `key "secure-port" takes one value`},
		{name: "a refused value", args: []string{"--config", file("value.yaml", "secure-port: high\n")}, err: `value.yaml: key "secure-port"`},
		{name: "a missing file given", args: []string{"--config", filepath.Join(dir, "missing.yaml")}, err: "missing.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := &cobra.Command{Use: "server"}
			fs := cmd.Flags()
			fs.String("data-dir", "/var/lib/kubeboot", "")
			fs.Int("secure-port", 6443, "")
			fs.Int64("etcd-quota-backend-bytes", 0, "")
			fs.StringArray("kubelet-arg", nil, "")
			fs.String("feature-gates", "", "")
			AddFlag(cmd)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			warnings, err := Apply(fs)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				if got := fs.Lookup(name).Value.String(); got != want {
					t.Errorf("--%s = %q, want %q", name, got, want)
				}
			}
			if got := strings.Join(warnings, "\n"); tc.warning != got {
				t.Errorf("warnings %q, want %q", got, tc.warning)
			}
		})
	}
}

// The default file is read only if it is there.
func TestApplyConfigFileDefaultAbsent(t *testing.T) {
	cmd := &cobra.Command{Use: "server"}
	AddFlag(cmd)
	if err := cmd.Flags().Set(flagName, filepath.Join(t.TempDir(), "config.yaml")); err != nil {
		t.Fatal(err)
	}
	cmd.Flags().Lookup(flagName).Changed = false // as the default
	if _, err := Apply(cmd.Flags()); err != nil {
		t.Errorf("an absent default file: %v", err)
	}
}

// FuzzApplyConfigFile: any --config file sets flags, or is refused with an
// error naming the file; none panics.
func FuzzApplyConfigFile(f *testing.F) {
	for _, s := range []string{
		"data-dir: /srv/kubeboot\nsecure-port: 7443\nkubelet-arg: [--max-pods=200]\nfeature-gates: {A: true}\nnode: true\n",
		"secure-port: [1, 2]\n", "secure-port: high\n", "- data-dir\n", "data-dir: [\n", "feature-gates: {A: {B: c}}\n",
		"kubelet-arg: {a: b}\n", "node: 1.5e300\n", "data-dir: null\n", "",
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "config.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := &cobra.Command{Use: "server"}
		fs := cmd.Flags()
		fs.String("data-dir", "/var/lib/kubeboot", "")
		fs.Int("secure-port", 6443, "")
		fs.Bool("node", false, "")
		fs.StringArray("kubelet-arg", nil, "")
		fs.StringSlice("disable", nil, "")
		fs.Duration("timeout", 0, "")
		fs.String("feature-gates", "", "")
		AddFlag(cmd)
		if err := fs.Parse([]string{"--config", path}); err != nil {
			t.Fatal(err)
		}
		if _, err := Apply(fs); err != nil && !strings.Contains(err.Error(), path) {
			t.Errorf("Apply(%q): the error does not name the file: %v", data, err)
		}
	})
}
