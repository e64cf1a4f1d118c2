package legacytokentracking

import (
	"context"
	"time"
)

// For the external tests (which start a real server, and the server
// imports this package).

// Sync is one pass.
func (c *Controller) Sync(ctx context.Context) error { return c.sync(ctx) }

// SetNow replaces the clock.
func (c *Controller) SetNow(now func() time.Time) { c.now = now }
