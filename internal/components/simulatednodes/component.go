package simulatednodes

import (
	"context"
	"errors"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/progress"
)

// Component is the simulated nodes as a component of a control plane.
type Component struct {
	opts     *Options
	ipam     *NodeIPAM
	progress progress.Func
	ready    chan struct{}
}

// New returns o.Count simulated nodes as a component: they act as User,
// with Access's rights, talking to the server in-process. ipam is
// kube-controller-manager's node IPAM, nil when it allocates no pod CIDRs.
func New(o *Options, ipam *NodeIPAM) *Component {
	return &Component{opts: o, ipam: ipam, ready: make(chan struct{})}
}

// Name implements controlplane.Component.
func (c *Component) Name() string { return "simulated nodes" }

// Complete implements controlplane.Component.
func (c *Component) Complete(s controlplane.Settings) (controlplane.Needs, error) {
	if err := errors.Join(c.opts.Validate(c.ipam)...); err != nil {
		return controlplane.Needs{}, err
	}
	c.progress = s.Progress
	return controlplane.Needs{
		User:    User,
		Grant:   Access,
		Allowed: authorizationv1.ResourceAttributes{Verb: "patch", Resource: "nodes", Subresource: "status"},
	}, nil
}

// Run implements controlplane.Component.
func (c *Component) Run(ctx context.Context, s *controlplane.Server) error {
	client, err := s.ClientConfig(User)
	if err != nil {
		return err
	}
	return Run(ctx, c.opts, client, s.SharedObjects(), c.ipam, c.progress, func() { close(c.ready) })
}

// Ready implements controlplane.ReadyComponent: it is closed once every
// node is Ready.
func (c *Component) Ready() <-chan struct{} { return c.ready }
