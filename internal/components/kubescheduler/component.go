package kubescheduler

import (
	"context"

	"github.com/spf13/pflag"
	authorizationv1 "k8s.io/api/authorization/v1"
	schedoptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/componentflags"
)

// Component is kube-scheduler as a component of a control plane.
type Component struct {
	// opts are the options it was made with; completed, a copy with what
	// the control plane gives defaulted.
	opts, completed *schedoptions.Options
	// hostnameSpreading: see New.
	hostnameSpreading bool
}

// New returns kube-scheduler with opts (NewOptions, then its flags) as a
// component: it acts as User, talking to the server in-process. With
// hostnameSpreading, for nodes that carry no zone label, its default
// configuration (without --config) spreads Pods by hostname alone
// (HostnameSpreading).
func New(opts *schedoptions.Options, hostnameSpreading bool) *Component {
	return &Component{opts: opts, hostnameSpreading: hostnameSpreading}
}

// Name implements controlplane.Component.
func (c *Component) Name() string { return "kube-scheduler" }

// Complete implements controlplane.Component: with a port of its own,
// the port asks the server who its callers are through a kubeconfig of
// s's; the options are validated as the binary does.
func (c *Component) Complete(s controlplane.Settings) (controlplane.Needs, error) {
	o := *c.opts
	if o.SecureServing.BindPort != 0 {
		o.Authentication, o.Authorization = s.DelegateToServer("scheduler", User, o.Authentication, o.Authorization)
	}
	if err := Validate(&o, c.hostnameSpreading); err != nil {
		return controlplane.Needs{}, err
	}
	c.completed = &o
	return controlplane.Needs{
		User:          User,
		Allowed:       authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Subresource: "binding"},
		Status:        "scheduler",
		SharedObjects: true,
	}, nil
}

// Flags implements controlplane.FlagsComponent: the flags opts was
// parsed with, and upstream's defaults.
func (c *Component) Flags() (flags, defaults []*pflag.FlagSet) {
	return componentflags.Sets(*c.completed.Flags), componentflags.Sets(*schedoptions.NewOptions().Flags)
}

// Run implements controlplane.Component.
func (c *Component) Run(ctx context.Context, s *controlplane.Server) error {
	client, err := s.ClientConfig(User)
	if err != nil {
		return err
	}
	return Run(ctx, c.completed, c.hostnameSpreading, client, s.SharedObjects())
}
