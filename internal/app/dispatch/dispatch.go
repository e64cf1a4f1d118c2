// Package dispatch says which of kubeboot's commands a command line runs:
// the one a link to the binary is named for (hyperkube style: a link named
// kube-apiserver runs `kubeboot apiserver`), else the first argument. It
// knows no command's code, so that what must know the command before any
// package initializes (translations) can ask it.
package dispatch

import (
	"path/filepath"
	"slices"
	"strings"
)

// linkNames maps the names a link to the binary may have to the command
// it runs: each server's binary name, kubectl, containerd and ctr.
var linkNames = map[string]string{
	"kube-apiserver":          "apiserver",
	"kube-controller-manager": "controller-manager",
	"kube-scheduler":          "scheduler",
	"kube-proxy":              "proxy",
	"kubelet":                 "kubelet",
	"kubectl":                 "kubectl",
	"containerd":              "containerd",
	"ctr":                     "ctr",
}

// CommandForName returns the command a binary invoked as argv0 runs
// directly (a link named kube-apiserver runs `kubeboot apiserver`, one
// named kubectl `kubeboot kubectl`), or "" for the `kubeboot` command.
func CommandForName(argv0 string) string {
	name := strings.TrimSuffix(filepath.Base(argv0), ".exe")
	return linkNames[name]
}

// Command returns the command the command line args (args[0] the
// program's name) runs: its link's, else args[1], which may be a flag of
// the root command or empty.
func Command(args []string) string {
	if len(args) == 0 {
		return ""
	}
	if c := CommandForName(args[0]); c != "" {
		return c
	}
	if len(args) > 1 {
		return args[1]
	}
	return ""
}

// Aliases are the names a link to the binary may have that run command,
// but for command's own, sorted.
func Aliases(command string) []string {
	var aliases []string
	for alias, c := range linkNames {
		if c == command && alias != command {
			aliases = append(aliases, alias)
		}
	}
	slices.Sort(aliases)
	return aliases
}
