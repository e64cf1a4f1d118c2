//go:build !linux

package dataplane

import (
	"context"

	"k8s.io/klog/v2"
)

// holder would keep the Gateways' own addresses on the node's network:
// only Linux nodes hold them.
type holder struct{ node string }

func (h *holder) hold(ctx context.Context, cfg *Config) bool {
	for _, a := range cfg.Announce {
		if a.Node == h.node {
			klog.FromContext(ctx).Error(nil, "Only Linux nodes hold the Gateways' own addresses", "address", a.Address)
		}
	}
	return true
}

func (h *holder) release(context.Context) {}
