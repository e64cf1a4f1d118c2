package election

import (
	"context"
	"sync/atomic"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Held is a leader election lock that notes when its holder first holds
// the lease. client-go's elector starts OnStartedLeading in a goroutine
// right after and does not wait for it; a component that must not return
// while its leading work still runs waits for that work once Acquired.
type Held struct {
	resourcelock.Interface
	acquired atomic.Bool
}

// Acquired reports whether the lock's holder has held the lease.
func (l *Held) Acquired() bool { return l.acquired.Load() }

// Create implements resourcelock.Interface.
func (l *Held) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, r)
	l.note(r, err)
	return err
}

// Update implements resourcelock.Interface.
func (l *Held) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, r)
	l.note(r, err)
	return err
}

func (l *Held) note(r resourcelock.LeaderElectionRecord, err error) {
	if err == nil && r.HolderIdentity == l.Identity() {
		l.acquired.Store(true)
	}
}
