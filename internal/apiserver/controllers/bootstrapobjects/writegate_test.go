package bootstrapobjects

import (
	"net/http"
	"sync"
	"testing"
	"time"
)

// admissionLike answers as a fresh server's admission chain does: a
// write that arrives before ready looks again every step until it is.
type admissionLike struct {
	start time.Time
	ready time.Duration // after start
	step  time.Duration
}

func (a admissionLike) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		for time.Since(a.start) < a.ready {
			time.Sleep(a.step)
		}
	}
	return &http.Response{StatusCode: http.StatusCreated, Body: http.NoBody, Request: req}, nil
}

// TestWriteGate: with 32 writes sent at once while admission is not
// ready, those the gate lets through after it became ready come back at
// once and open it for the rest; held by the admission chain they would
// all have waited for its next look. Reads are never held.
func TestWriteGate(t *testing.T) {
	const (
		writes   = 32
		ready    = 100 * time.Millisecond
		step     = 2 * time.Second
		interval = 10 * time.Millisecond
	)
	start := time.Now()
	rt := newWriteGate(interval).wrap(admissionLike{start: start, ready: ready, step: step})

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		took []time.Duration
	)
	for range writes {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, "http://server/api/v1/namespaces", nil)
			if _, err := rt.RoundTrip(req); err != nil {
				t.Error(err)
			}
			mu.Lock()
			took = append(took, time.Since(start))
			mu.Unlock()
		})
	}

	time.Sleep(interval / 2) // the first write is held by admission, the gate is closed
	req, _ := http.NewRequest(http.MethodGet, "http://server/api/v1/namespaces", nil)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if read := time.Since(start); read > step/2 {
		t.Errorf("a read took %v: the gate held it", read)
	}
	wg.Wait()

	// At most the writes let through before ready (one every interval
	// from the start) wait for admission's next look.
	held := 0
	for _, d := range took {
		if d >= step/2 {
			held++
		}
	}
	if maxHeld := int(ready/interval) + 1; held > maxHeld {
		t.Errorf("%d of %d writes waited for admission's next look, want at most %d", held, writes, maxHeld)
	}
	if held == 0 {
		t.Errorf("no write waited: the fake admission chain was ready at once")
	}
}
