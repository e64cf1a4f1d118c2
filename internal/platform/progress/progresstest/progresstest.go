// Package progresstest records the progress updates a test's steps report.
package progresstest

import (
	"sync"

	"github.com/kubeboot/kubeboot/internal/platform/progress"
)

// Recorder keeps every update reported to it; its zero value is ready.
type Recorder struct {
	mu      sync.Mutex
	updates []progress.Update
}

// Report records u; it is a progress.Func.
func (r *Recorder) Report(u progress.Update) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.updates = append(r.updates, u)
}

// Updates returns the updates of step so far, in order; all of them for
// step "".
func (r *Recorder) Updates(step string) []progress.Update {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []progress.Update
	for _, u := range r.updates {
		if step == "" || u.Step == step {
			out = append(out, u)
		}
	}
	return out
}
