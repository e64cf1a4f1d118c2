package kubernetesservice

import "context"

// Sync is one pass of the controller, for the external tests (which start
// a real server, and the server imports this package). correct also fixes
// the Service's ports and type, as the first pass does.
func (c *Controller) Sync(ctx context.Context, correct bool) error { return c.sync(ctx, correct) }
