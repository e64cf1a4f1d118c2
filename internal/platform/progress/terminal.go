package progress

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Terminal shows the steps in progress on the last line of a terminal.
// It is also the terminal's writer: a line written through it appears
// above the progress line, which is drawn again below it. A step appears
// only once it has lasted ShowAfter, so a quick start shows none; when
// it completes, its progress gives way to a line saying how long it took.
type Terminal struct {
	mu    sync.Mutex
	out   io.Writer
	width int
	now   func() time.Time
	steps []*step
	// shown is whether the last line is a progress line now; partial,
	// whether it is a line written through Write and not ended yet.
	shown, partial bool
	lastDraw       time.Time
}

type step struct {
	Update
	started time.Time
}

const (
	// ShowAfter is how long a step runs before it is shown.
	ShowAfter = 300 * time.Millisecond
	// redrawEvery bounds how often the line changes.
	redrawEvery = 100 * time.Millisecond
	// eraseLine moves to the start of the line and clears it.
	eraseLine = "\r\x1b[K"
)

// NewTerminal returns a Terminal writing to out, a terminal width
// columns wide (0: 80).
func NewTerminal(out io.Writer, width int) *Terminal {
	if width <= 0 {
		width = 80
	}
	return &Terminal{out: out, width: width, now: time.Now}
}

// Write writes p above the progress line.
func (t *Terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.erase()
	n, err := t.out.Write(p)
	// A partial line stays the last one until it is ended.
	if len(p) > 0 {
		t.partial = p[len(p)-1] != '\n'
	}
	t.draw()
	return n, err
}

// Report records u, and shows it if its step has lasted.
func (t *Terminal) Report(u Update) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	i := t.find(u.Step)
	switch {
	case u.Finished():
		if i < 0 {
			return
		}
		started := t.steps[i].started
		t.steps = append(t.steps[:i], t.steps[i+1:]...)
		// A step that was shown and completed leaves one line saying
		// how long it took ("simulated nodes Ready 5000/5000 in 41.2s");
		// one that ended otherwise (failed, or of unknown length) goes.
		if took := now.Sub(started); took >= ShowAfter && !u.End && !t.partial {
			t.erase()
			_, _ = fmt.Fprintf(t.out, "%s in %s\n", u, took.Round(100*time.Millisecond))
		}
	case i < 0:
		t.steps = append(t.steps, &step{Update: u, started: now})
		return
	default:
		t.steps[i].Update = u
		if now.Sub(t.lastDraw) < redrawEvery {
			return
		}
	}
	t.erase()
	t.draw()
}

func (t *Terminal) find(name string) int {
	for i, s := range t.steps {
		if s.Step == name {
			return i
		}
	}
	return -1
}

// erase clears the progress line, if one is shown.
func (t *Terminal) erase() {
	if t.shown {
		_, _ = io.WriteString(t.out, eraseLine)
		t.shown = false
	}
}

// draw writes the line of the steps that have lasted, cut to the width.
func (t *Terminal) draw() {
	if t.partial {
		return
	}
	now := t.now()
	var parts []string
	for _, s := range t.steps {
		if now.Sub(s.started) >= ShowAfter {
			parts = append(parts, s.String())
		}
	}
	if len(parts) == 0 {
		return
	}
	line := strings.Join(parts, " · ")
	if utf8.RuneCountInString(line) >= t.width {
		line = string([]rune(line)[:t.width-2]) + "…"
	}
	_, _ = io.WriteString(t.out, line)
	t.shown = true
	t.lastDraw = now
}

// String is how a step in progress reads: "CRDs established 12/80",
// "restoring snapshot 120.5/260.0 MB (46%)".
func (u Update) String() string {
	switch {
	case u.Total <= 0 && u.Unit == Bytes:
		return fmt.Sprintf("%s %s", u.Step, megabytes(u.Done))
	case u.Total <= 0:
		return fmt.Sprintf("%s %d", u.Step, u.Done)
	case u.Unit == Bytes:
		return fmt.Sprintf("%s %.1f/%s (%d%%)", u.Step, float64(u.Done)/1e6, megabytes(u.Total), u.Done*100/u.Total)
	default:
		return fmt.Sprintf("%s %d/%d", u.Step, u.Done, u.Total)
	}
}

func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// Clear erases the progress line and forgets the steps: what is written
// to the terminal after it, not through it, starts on a clean line.
func (t *Terminal) Clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.erase()
	t.steps = nil
}
