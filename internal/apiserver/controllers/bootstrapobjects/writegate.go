package bootstrapobjects

import (
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// gateInterval is how far apart writeGate lets writes through until one
// has come back.
const gateInterval = 10 * time.Millisecond

// NewClient returns the client for the Ensure functions: config's, with
// the writes of a start paced by a writeGate shared by all that use it.
func NewClient(config *rest.Config) (kubernetes.Interface, error) {
	config = rest.CopyConfig(config)
	config.Wrap(newWriteGate(gateInterval).wrap)
	return kubernetes.NewForConfig(config)
}

// writeGate paces the first writes of a fresh server's bootstrap hooks.
//
// The admission chain holds each write until its plugins' informers have
// synced, and a held write looks again only every 100 ms
// (admission.Handler.WaitForReady; the policy plugins' sources also sync
// on a 100 ms poll). Writes sent together as the server starts serving
// would all wait for the same look, up to 100 ms after the chain became
// ready. The gate lets one write through every interval until a write has
// come back: the first sent after the chain became ready comes back at
// once, and from then on every write passes. Reads always pass, so a
// restart, which finds the objects stored, is not paced.
type writeGate struct {
	interval time.Duration
	open     chan struct{} // closed once a write has come back
	opened   sync.Once

	mu   sync.Mutex
	last time.Time // when the latest write was let through
}

func newWriteGate(interval time.Duration) *writeGate {
	return &writeGate{interval: interval, open: make(chan struct{})}
}

func (g *writeGate) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		switch req.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return rt.RoundTrip(req)
		}
		if err := g.wait(req); err != nil {
			return nil, err
		}
		resp, err := rt.RoundTrip(req)
		g.opened.Do(func() { close(g.open) })
		return resp, err
	})
}

// wait returns when the gate is open or req's turn has come, or with
// req's context's error.
func (g *writeGate) wait(req *http.Request) error {
	select {
	case <-g.open:
		return nil
	default:
	}
	g.mu.Lock()
	turn := g.last.Add(g.interval)
	if now := time.Now(); turn.Before(now) {
		turn = now
	}
	g.last = turn
	g.mu.Unlock()
	timer := time.NewTimer(time.Until(turn))
	defer timer.Stop()
	select {
	case <-g.open:
		return nil
	case <-timer.C:
		return nil
	case <-req.Context().Done():
		return req.Context().Err()
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
