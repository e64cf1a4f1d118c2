// Package presence waits for a component's first object: a component whose
// work is objects of one kind (HelmCharts, Nodes to scrape) costs no lease,
// informer cache or worker until one exists, and starts as it appears.
package presence

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
)

// retryInterval is how long Wait waits after a failed list, or a watch
// that ended without an object (its resource version expired), before it
// lists again.
const retryInterval = time.Second

// Wait returns once lw has an object (at once if one exists), or ctx's
// error. It lists one object at most, then watches from the list's
// resource version (a RetryWatcher: it watches again after a lost
// connection), so that it holds nothing however many objects come.
func Wait(ctx context.Context, lw cache.ListerWatcherWithContext) error {
	return wait.PollUntilContextCancel(ctx, retryInterval, true, func(ctx context.Context) (bool, error) {
		found, err := once(ctx, lw)
		if err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).V(2).Info("Waiting for the first object", "err", err)
		}
		return found, nil
	})
}

// once lists, and watches until the watch ends; it reports whether an
// object was found.
func once(ctx context.Context, lw cache.ListerWatcherWithContext) (bool, error) {
	list, err := lw.ListWithContext(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return false, err
	}
	if meta.LenList(list) > 0 {
		return true, nil
	}
	accessor, err := meta.ListAccessor(list)
	if err != nil {
		return false, err
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, accessor.GetResourceVersion(), lw)
	if err != nil {
		return false, err
	}
	defer w.Stop()
	for e := range w.ResultChan() {
		switch e.Type {
		case watch.Added:
			return true, nil
		case watch.Error:
			// The resource version is too old: list again.
			return false, nil
		}
	}
	return false, nil
}

// WaitAny returns once any of lws has an object, or ctx's error.
func WaitAny(ctx context.Context, lws ...cache.ListerWatcherWithContext) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	found := make(chan struct{}, len(lws))
	for _, lw := range lws {
		go func() {
			if Wait(ctx, lw) == nil {
				found <- struct{}{}
			}
		}()
	}
	select {
	case <-found:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
