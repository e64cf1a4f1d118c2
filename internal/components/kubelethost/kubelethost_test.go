package kubelethost

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	v1, v2 := filepath.Join(dir, "v1"), filepath.Join(dir, "v2")
	for _, d := range []string{v1, v2} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(v2, "cgroup.controllers"), []byte("cpu memory pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "cri.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	notSock := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(notSock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	config := func(body string) string {
		p := filepath.Join(t.TempDir(), "kubelet.yaml")
		if err := os.WriteFile(p, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	endpoint := "--container-runtime-endpoint=unix://" + sock
	for _, tc := range []struct {
		name string
		root string
		args []string
		want []string // substrings of the error; none: no error
	}{
		{"cgroup v2 and a runtime", v2, []string{endpoint}, nil},
		{"cgroup v1", v1, []string{endpoint}, []string{"is not cgroup v2", "--fail-cgroupv1=false"}},
		{"cgroup v1 allowed by flag", v1, []string{endpoint, "--fail-cgroupv1=false"}, nil},
		{"cgroup v1 allowed by the config file", v1, []string{endpoint, "--config", config("failCgroupV1: false\n")}, nil},
		{"the flag wins over the file", v1, []string{endpoint, "--fail-cgroupv1=true", "--config", config("failCgroupV1: false\n")}, []string{"is not cgroup v2"}},
		{"no runtime at the default endpoint", v2, nil, []string{"unix:///run/containerd/containerd.sock", "containerd or CRI-O"}},
		{"no runtime at the given endpoint", v2, []string{"--container-runtime-endpoint", "unix://" + notSock}, []string{notSock}},
		{"the endpoint from the config file", v2, []string{"--config", config("containerRuntimeEndpoint: unix://" + sock + "\n")}, nil},
		{"both problems in one line", v1, []string{"--container-runtime-endpoint=unix:///nonexistent.sock"}, []string{"is not cgroup v2", "/nonexistent.sock"}},
		{"help is the kubelet's", v1, []string{"--help"}, nil},
		{"bad flags are the kubelet's", v1, []string{"--max-pods=many"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Host{CgroupRoot: tc.root}.Check(tc.args)
			if len(tc.want) == 0 {
				if err != nil {
					t.Errorf("Check(%q) = %v, want nil", tc.args, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check(%q) = nil, want an error with %q", tc.args, tc.want)
			}
			if strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "this host cannot run the kubelet: ") {
				t.Errorf("Check(%q) = %q, want one line saying this host cannot run the kubelet", tc.args, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check(%q) = %q, want %q in it", tc.args, err, w)
				}
			}
		})
	}
}
