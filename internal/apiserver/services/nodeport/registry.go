package nodeport

import (
	"context"
	"time"

	"k8s.io/kubernetes/pkg/registry/core/service/portallocator"
)

// registryTimeout bounds one call from the Service registry, which gives
// its allocator no context.
const registryTimeout = 30 * time.Second

// ForRegistry returns a as the port allocator upstream's Service registry
// takes: one port per call. Concurrent calls still share compare-and-swap
// writes, as they queue on the same stream.
func (a *Allocator) ForRegistry() portallocator.Interface { return registryView{a} }

type registryView struct{ a *Allocator }

var _ portallocator.Interface = registryView{}

func (v registryView) one(want int) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	ports, errs, err := v.a.Allocate(ctx, []int{want}, false)
	if err != nil {
		return 0, err
	}
	if err := errs[0]; err != nil {
		return 0, err
	}
	return ports[0], nil
}

// Allocate implements portallocator.Interface.
func (v registryView) Allocate(port int) error {
	_, err := v.one(port)
	return err
}

// AllocateNext implements portallocator.Interface.
func (v registryView) AllocateNext() (int, error) { return v.one(0) }

// Release implements portallocator.Interface.
func (v registryView) Release(port int) error {
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	return v.a.Release(ctx, []int{port})
}

// ForEach implements portallocator.Interface on the stored bitmap; a read
// error yields no ports (the registry uses it for dry runs only).
func (v registryView) ForEach(fn func(int)) {
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	ports, err := v.a.Snapshot(ctx)
	if err != nil {
		return
	}
	for _, p := range ports {
		fn(p)
	}
}

// Has implements portallocator.Interface.
func (v registryView) Has(port int) bool {
	found := false
	v.ForEach(func(p int) { found = found || p == port })
	return found
}

// Destroy implements portallocator.Interface. The allocator's owner
// closes it.
func (registryView) Destroy() {}

// EnableMetrics implements portallocator.Interface: the allocator
// records its metrics always.
func (registryView) EnableMetrics() {}
