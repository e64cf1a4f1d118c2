package apiserver

import (
	"fmt"

	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/kubeboot/kubeboot/internal/controller/systemnamespaces"
)

// Post-start hook names, as kube-apiserver's; each is also a readiness
// check poststarthook/<name>.
const (
	hookSystemNamespaces = "start-system-namespaces-controller"
)

// addHooks registers the bootstrap controllers as post-start hooks. A hook
// returns once its controller's first pass succeeded, so /readyz stays
// failing until then; a hook error ends the process.
func (s *Server) addHooks(cfg Config) error {
	ns := systemnamespaces.New(s.Client, cfg.SystemNamespacesInterval)
	if err := s.Generic.AddPostStartHook(hookSystemNamespaces, func(hc genericapiserver.PostStartHookContext) error {
		return ns.Start(hc)
	}); err != nil {
		return fmt.Errorf("adding post-start hook %s: %w", hookSystemNamespaces, err)
	}
	return nil
}
