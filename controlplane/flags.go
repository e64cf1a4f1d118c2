package controlplane

import (
	"os"

	"github.com/kubeboot/kubeboot/internal/apiserver"

	"github.com/kubeboot/kubeboot/internal/platform/componentflags"
)

// publishFlags publishes the settings of the upstream components the
// process runs, as their command lines in the data directory's
// componentflags.Dir: kube-apiserver's, the embedded etcd member's and
// each FlagsComponent's. What an earlier start published is replaced,
// so a component left out no longer shows.
func (s *Server) publishFlags() error {
	dir := componentflags.Dir(s.cfg.DataDir)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := componentflags.Publish(dir, "kube-apiserver", componentflags.Args(componentflags.Sets(apiserver.DefaultFlags()), componentflags.Sets(s.api.Flags)...)); err != nil {
		return err
	}
	if s.cfg.embeddedEtcd() {
		args, err := s.etcdConfig().Args()
		if err != nil {
			return err
		}
		if err := componentflags.Publish(dir, "etcd", args); err != nil {
			return err
		}
	}
	for _, c := range s.cfg.components {
		if f, ok := c.Component.(FlagsComponent); ok {
			flags, defaults := f.Flags()
			if err := componentflags.Publish(dir, c.Name(), componentflags.Args(defaults, flags...)); err != nil {
				return err
			}
		}
	}
	return nil
}
