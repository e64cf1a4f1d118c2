package sharedobjects

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// Watch passes source's events on, each object replaced by share's
// answer for it first: a Pool's Transform or Selected for a watch no
// informer factory makes (kwok's), or another kind of sharing. Unlike
// watch.Filter, a stopped Watch never waits for its consumer to read an
// event: client-go's reflectors stop their watches without draining
// them, and watch.Filter's goroutine would then wait for good.
func Watch(source watch.Interface, share func(obj any) (any, error)) watch.Interface {
	w := &sharingWatch{source: source, share: share, result: make(chan watch.Event), done: make(chan struct{})}
	go w.run()
	return w
}

type sharingWatch struct {
	source watch.Interface
	share  func(obj any) (any, error)
	result chan watch.Event
	done   chan struct{}
	stop   sync.Once
}

func (w *sharingWatch) ResultChan() <-chan watch.Event { return w.result }

func (w *sharingWatch) Stop() {
	w.stop.Do(func() {
		close(w.done)
		w.source.Stop()
	})
}

func (w *sharingWatch) run() {
	defer close(w.result)
	for e := range w.source.ResultChan() {
		if e.Type != watch.Error && e.Type != watch.Bookmark && e.Object != nil {
			// A share that fails or answers something else leaves the
			// event as it came.
			if shared, err := w.share(e.Object); err == nil {
				if obj, ok := shared.(runtime.Object); ok {
					e.Object = obj
				}
			}
		}
		select {
		case w.result <- e:
		case <-w.done:
			return
		}
	}
}
