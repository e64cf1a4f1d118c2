package dispatch

import (
	"slices"
	"testing"
)

func TestCommand(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a link named for a server", []string{"/usr/local/bin/kube-apiserver", "--secure-port=0"}, "apiserver"},
		{"a link named kubectl", []string{"kubectl", "get", "pods"}, "kubectl"},
		{"a link with .exe", []string{"kube-scheduler.exe"}, "scheduler"},
		{"the binary and a command", []string{"/usr/local/bin/kubeboot", "kubectl", "get", "pods"}, "kubectl"},
		{"the binary and a server", []string{"kubeboot", "server", "--node"}, "server"},
		{"the binary alone", []string{"kubeboot"}, ""},
		{"a root flag", []string{"kubeboot", "--version"}, "--version"},
		{"a link to an unknown name", []string{"hyperkube", "kubelet"}, "kubelet"},
		{"nothing", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Command(tc.args); got != tc.want {
				t.Errorf("Command(%q) = %q, want %q", tc.args, got, tc.want)
			}
		})
	}
}

func TestAliases(t *testing.T) {
	for command, want := range map[string][]string{
		"apiserver": {"kube-apiserver"},
		"kubectl":   nil,
		"kubelet":   nil,
		"server":    nil,
	} {
		if got := Aliases(command); !slices.Equal(got, want) {
			t.Errorf("Aliases(%q) = %q, want %q", command, got, want)
		}
	}
}
