//go:build !linux

package networkpolicy

import (
	"context"
	"errors"
)

// errNotLinux is why a node enforces no policy off Linux: nftables is
// Linux's (and a node runs on Linux only).
var errNotLinux = errors.New("NetworkPolicy is enforced on Linux only")

// Enforcer is, off Linux, a node part that refuses to run.
type Enforcer struct{ synced chan struct{} }

// NewEnforcer returns an Enforcer that refuses to run.
func NewEnforcer(Node) *Enforcer {
	e := &Enforcer{synced: make(chan struct{})}
	close(e.synced)
	return e
}

// Synced is closed at once.
func (e *Enforcer) Synced() <-chan struct{} { return e.synced }

// Run reports that policies are enforced on Linux only.
func (*Enforcer) Run(context.Context) error { return errNotLinux }
