package sharedobjects

import (
	"runtime"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

// TestWatchShares: a watch's objects are the pool's held copies, a
// bookmark passes as it came.
func TestWatchShares(t *testing.T) {
	p := New()
	held := pod("u1", "5")
	if _, err := p.Transform(held); err != nil {
		t.Fatal(err)
	}
	fake := watch.NewFakeWithChanSize(3, false)
	w := Watch(fake, p.Transform)
	defer w.Stop()
	decoded, newer, bookmark := pod("u1", "5"), pod("u1", "6"), pod("", "7")
	fake.Add(decoded)
	fake.Modify(newer)
	fake.Action(watch.Bookmark, bookmark)
	for _, want := range []struct {
		name string
		obj  any
	}{{"the held version", held}, {"a version not held", newer}, {"a bookmark", bookmark}} {
		select {
		case e := <-w.ResultChan():
			if e.Object != want.obj {
				t.Errorf("%s: got another object", want.name)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no event", want.name)
		}
	}
	if newer.ManagedFields != nil {
		t.Errorf("managedFields kept: %v", newer.ManagedFields)
	}
	runtime.KeepAlive(held)
}

// TestWatchStops: a watch stopped while an event waits to be read ends
// without it being read (watch.Filter's goroutine waits for a reader for
// good), and stops the watch under it.
func TestWatchStops(t *testing.T) {
	fake := watch.NewFakeWithChanSize(1, false)
	w := Watch(fake, New().Transform)
	fake.Add(pod("u1", "5")) // never read
	time.Sleep(50 * time.Millisecond)
	w.Stop()
	time.Sleep(50 * time.Millisecond)
	select {
	case e, open := <-w.ResultChan():
		if open {
			t.Errorf("the stopped watch still delivers: %s", e.Type)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stopped watch's channel is still open")
	}
	if !fake.IsStopped() {
		t.Error("the watch under it was not stopped")
	}
}
