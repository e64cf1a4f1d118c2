package systemnamespaces

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"
)

// For the external tests (which start a real server, and the server
// imports this package).

// NewFor returns a controller keeping names instead of the system
// namespaces, so that a test does not race the server's own controller.
func NewFor(client kubernetes.Interface, interval time.Duration, names ...string) *Controller {
	c := New(client, interval)
	c.namespaces = names
	return c
}

// Sync is one pass.
func (c *Controller) Sync(ctx context.Context) error { return c.sync(ctx) }
