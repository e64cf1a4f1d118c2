package clusterauthentication

import "context"

// For the external tests (which start a real server, and the server
// imports this package).

// Sync is one pass.
func (c *Controller) Sync(ctx context.Context) error { return c.sync(ctx) }

// MergeBundles is mergeBundles.
var MergeBundles = mergeBundles
