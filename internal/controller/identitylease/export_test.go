package identitylease

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"
)

// For the external tests (which start a real server, and the server
// imports this package).

// Collect is one pass of the garbage collector at now.
func Collect(ctx context.Context, client kubernetes.Interface, now time.Time) error {
	return (&collector{client: client}).sync(ctx, now)
}
