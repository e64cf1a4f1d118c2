// Package presence waits for a component's first object: a component whose
// work is objects of one kind (HelmCharts, Nodes to scrape) costs no lease,
// informer cache or worker until one exists, and starts as it appears.
package presence

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Wait returns once lw lists or watches an object (at once if one
// exists), or ctx's error. Meanwhile it holds one list-watch, which it
// lists again after any failure, and no more than the objects it has
// seen.
func Wait(ctx context.Context, lw cache.ListerWatcher, example runtime.Object) error {
	_, err := watchtools.UntilWithSync(ctx, lw, example,
		func(store cache.Store) (bool, error) { return len(store.ListKeys()) > 0, nil },
		func(e watch.Event) (bool, error) { return e.Type == watch.Added, nil })
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
