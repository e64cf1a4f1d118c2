package e2e

import (
	"slices"
	"strings"
	"testing"
)

// lacking are kube-apiserver 1.37's health checks for features kubeboot
// does not have (yet); every other check of the reference must be listed.
var lacking = map[string]string{
	"poststarthook/peer-endpoint-reconciler-controller": "mixed-version proxy off: its peer leases need an etcd connection of their own",
}

// extra are kubeboot's checks the reference does not list.
var extra = map[string]string{
	"poststarthook/start-namespace-controller": "controller-manager's controller, here until it exists",
	"poststarthook/install-crds-from-dir":      "--crd-dir",
	"etcd-alarms":                              "the embedded etcd's alarms (NOSPACE), which kubeboot clears itself",
	// kube-apiserver has it when started with --proxy-client-cert-file;
	// the reference server was not.
	"poststarthook/aggregator-reload-proxy-client-cert": "front-proxy client certificate",
}

// checkNames parses the check names of a ?verbose health answer.
func checkNames(body string) []string {
	var names []string
	for _, line := range strings.Split(body, "\n") {
		if name, ok := strings.CutPrefix(line, "[+]"); ok {
			names = append(names, strings.TrimSuffix(name, " ok"))
		}
	}
	return names
}

// TestHealthChecksMatchReference checks /readyz?verbose and /livez?verbose
// list the checks of the server chain as kube-apiserver does, in its
// order: the generic server's, the apiextensions server's, the bootstrap
// controllers' and the aggregator's.
func TestHealthChecksMatchReference(t *testing.T) {
	t.Parallel()
	for _, endpoint := range []string{"readyz", "livez"} {
		t.Run(endpoint, func(t *testing.T) {
			got := checkNames(kubectl(t, "get", "--raw", "/"+endpoint+"?verbose"))
			ref := checkNames(readTestdata(t, endpoint+"-verbose.txt"))
			var want []string
			for _, name := range ref {
				if _, skip := lacking[name]; !skip {
					want = append(want, name)
				}
			}
			var common []string
			for _, name := range got {
				if slices.Contains(want, name) {
					common = append(common, name)
				} else if _, ok := extra[name]; !ok {
					t.Errorf("/%s?verbose lists %q, which kube-apiserver does not", endpoint, name)
				}
			}
			if !slices.Equal(common, want) {
				t.Errorf("/%s?verbose checks (without kube-apiserver's for features kubeboot lacks):\n got %q\nwant %q", endpoint, common, want)
			}
		})
	}
}
