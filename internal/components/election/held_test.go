package election

import (
	"context"
	"errors"
	"testing"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeLock answers Create and Update with err and names itself "me".
type fakeLock struct {
	resourcelock.Interface
	err error
}

func (f fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return f.err }
func (f fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return f.err }
func (f fakeLock) Identity() string                                                { return "me" }

// TestHeld checks what the components' wait for their leading work rests
// on: the lock notes a lease its holder came to hold, and nothing else.
func TestHeld(t *testing.T) {
	failed := errors.New("conflict")
	tests := []struct {
		name   string
		create bool
		holder string
		err    error
		want   bool
	}{
		{"created for me", true, "me", nil, true},
		{"updated to me", false, "me", nil, true},
		{"update refused", false, "me", failed, false},
		{"released (no holder)", false, "", nil, false},
		{"another's record", true, "other", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &Held{Interface: fakeLock{err: tt.err}}
			r := resourcelock.LeaderElectionRecord{HolderIdentity: tt.holder}
			var err error
			if tt.create {
				err = l.Create(context.Background(), r)
			} else {
				err = l.Update(context.Background(), r)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("error %v, want %v", err, tt.err)
			}
			if got := l.Acquired(); got != tt.want {
				t.Errorf("acquired %v, want %v", got, tt.want)
			}
		})
	}
}
