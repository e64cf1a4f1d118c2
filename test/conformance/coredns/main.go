// Command coredns is CoreDNS with the plugins the Gateway API conformance
// suite's Corefile names (forward, log, errors, whoami), built from the
// CoreDNS module kubeboot links, for the image the suite's base manifests
// run as registry.k8s.io/coredns/coredns (test/conformance's images).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/whoami"
)

func main() {
	dnsserver.Directives = []string{"log", "errors", "whoami", "forward"}
	coremain.Run()
}
