package componentflags

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spf13/pflag"
)

func TestArgs(t *testing.T) {
	defaults := pflag.NewFlagSet("defaults", pflag.ContinueOnError)
	defaults.Bool("profiling", true, "")
	defaults.Bool("reload", false, "")
	defaults.Int("maxsize", 100, "")
	defaults.StringSlice("plugins", nil, "")

	fs := pflag.NewFlagSet("component", pflag.ContinueOnError)
	fs.Bool("profiling", false, "") // off, but not by default: given
	fs.Bool("reload", false, "")    // off by default: left out
	fs.Int("maxsize", 100, "")      // on, at its default: given
	fs.StringSlice("plugins", []string{"A", "B"}, "")
	fs.String("token-file", "", "")     // not upstream's, empty: left out
	fs.String("cert", "/pki/a.crt", "") // not upstream's, set: given
	fs.Duration("timeout", 0, "")       // zero: left out
	fs.String("secret", "s3cr3t", "")
	if err := fs.SetAnnotation("secret", classified, []string{"true"}); err != nil {
		t.Fatal(err)
	}
	again := pflag.NewFlagSet("again", pflag.ContinueOnError)
	again.String("cert", "/other.crt", "") // registered twice: the first wins

	got := Args([]*pflag.FlagSet{defaults}, fs, again)
	want := []string{"--cert=/pki/a.crt", "--maxsize=100", "--plugins=A,B", "--profiling=false", "--secret=CLASSIFIED"}
	if !slices.Equal(got, want) {
		t.Errorf("Args = %q, want %q", got, want)
	}
}

func TestPublish(t *testing.T) {
	dir := filepath.Join(t.TempDir(), DirName)
	if err := Publish(dir, "kube-apiserver", []string{"--a=1", "--b=2"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "kube-apiserver")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), "kube-apiserver --a=1 --b=2\n"; got != want {
		t.Errorf("file holds %q, want %q", got, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v (%v), want 0600: it names key files", fi.Mode().Perm(), err)
	}
	// A second start replaces the line.
	if err := Publish(dir, "kube-apiserver", []string{"--a=3"}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != "kube-apiserver --a=3\n" {
		t.Errorf("after a second Publish the file holds %q", data)
	}
}
