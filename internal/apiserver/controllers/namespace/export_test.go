package namespace

import "context"

// For the external tests (which start a real server, and the server
// imports this package).

// Sync is one pass over namespace name; it reports whether it is done.
func (c *Controller) Sync(ctx context.Context, name string) (bool, error) { return c.sync(ctx, name) }
