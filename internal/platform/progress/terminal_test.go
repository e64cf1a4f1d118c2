package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// clock is a Terminal's time, moved by the test.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newTestTerminal(width int) (*Terminal, *bytes.Buffer, *clock) {
	var out bytes.Buffer
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	term := NewTerminal(&out, width)
	term.now = c.now
	return term, &out, c
}

func TestTerminalQuickStepShowsNothing(t *testing.T) {
	term, out, c := newTestTerminal(80)
	term.Report(Update{Step: "CRDs established", Total: 3})
	c.advance(ShowAfter / 2)
	term.Report(Update{Step: "CRDs established", Done: 1, Total: 3})
	term.Report(Update{Step: "CRDs established", Done: 3, Total: 3})
	if _, err := term.Write([]byte("ready in 120 ms\n")); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "ready in 120 ms\n"; got != want {
		t.Errorf("terminal shows %q, want %q", got, want)
	}
}

func TestTerminalShowsLastingStepUntilItEnds(t *testing.T) {
	term, out, c := newTestTerminal(80)
	term.Report(Update{Step: "simulated nodes Ready", Total: 100})
	c.advance(ShowAfter)
	term.Report(Update{Step: "simulated nodes Ready", Done: 10, Total: 100})
	if got, want := out.String(), "simulated nodes Ready 10/100"; got != want {
		t.Fatalf("after %s the line is %q, want %q", ShowAfter, got, want)
	}
	// Updates within redrawEvery do not redraw.
	c.advance(redrawEvery / 2)
	term.Report(Update{Step: "simulated nodes Ready", Done: 20, Total: 100})
	if strings.Contains(out.String(), "20/100") {
		t.Errorf("redrawn within %s: %q", redrawEvery, out.String())
	}
	c.advance(redrawEvery)
	term.Report(Update{Step: "simulated nodes Ready", Done: 30, Total: 100})
	if !strings.HasSuffix(out.String(), eraseLine+"simulated nodes Ready 30/100") {
		t.Errorf("not redrawn after %s: %q", redrawEvery, out.String())
	}
	// A line written meanwhile goes above the progress line.
	out.Reset()
	if _, err := term.Write([]byte("E1126 an error\n")); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), eraseLine+"E1126 an error\nsimulated nodes Ready 30/100"; got != want {
		t.Errorf("writing a line gives %q, want %q", got, want)
	}
	// The end replaces the progress with how long the step took.
	out.Reset()
	c.advance(1234 * time.Millisecond)
	term.Report(Update{Step: "simulated nodes Ready", Done: 100, Total: 100})
	if got, want := out.String(), eraseLine+"simulated nodes Ready 100/100 in 1.7s\n"; got != want {
		t.Errorf("the end writes %q, want %q", got, want)
	}
	out.Reset()
	if _, err := term.Write([]byte("ready\n")); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "ready\n" {
		t.Errorf("after the end a line is written as %q", got)
	}
}

func TestTerminalSeveralStepsAndPartialLines(t *testing.T) {
	term, out, c := newTestTerminal(80)
	term.Report(Update{Step: "restoring snapshot", Total: 200e6, Unit: Bytes})
	term.Report(Update{Step: "checking", Unit: Bytes})
	c.advance(ShowAfter)
	term.Report(Update{Step: "restoring snapshot", Done: 50e6, Total: 200e6, Unit: Bytes})
	if got, want := out.String(), "restoring snapshot 50.0/200.0 MB (25%) · checking 0.0 MB"; got != want {
		t.Fatalf("line %q, want %q", got, want)
	}
	// A step of unknown length ends with End.
	out.Reset()
	term.Report(Update{Step: "checking", End: true})
	if got, want := out.String(), eraseLine+"restoring snapshot 50.0/200.0 MB (25%)"; got != want {
		t.Errorf("after one step ends: %q, want %q", got, want)
	}
	// A partial line is not followed by the progress line.
	out.Reset()
	if _, err := term.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), eraseLine+"partial"; got != want {
		t.Errorf("partial line: %q, want %q", got, want)
	}
	// Nor drawn after it by an update, until the line is ended.
	c.advance(redrawEvery)
	term.Report(Update{Step: "restoring snapshot", Done: 60e6, Total: 200e6, Unit: Bytes})
	if got, want := out.String(), eraseLine+"partial"; got != want {
		t.Errorf("after an update the partial line is %q, want %q", got, want)
	}
	out.Reset()
	if _, err := term.Write([]byte(" line\n")); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), " line\nrestoring snapshot 60.0/200.0 MB (30%)"; got != want {
		t.Errorf("ending the line gives %q, want %q", got, want)
	}
}

func TestTerminalCutsToWidth(t *testing.T) {
	term, out, c := newTestTerminal(20)
	term.Report(Update{Step: "a step with a long name", Total: 5})
	c.advance(ShowAfter)
	term.Report(Update{Step: "a step with a long name", Done: 1, Total: 5})
	if got, want := out.String(), "a step with a long…"; got != want {
		t.Errorf("line %q, want %q (19 columns)", got, want)
	}
}

func TestUpdateString(t *testing.T) {
	for _, tc := range []struct {
		u    Update
		want string
	}{
		{Update{Step: "CRDs established", Done: 12, Total: 80}, "CRDs established 12/80"},
		{Update{Step: "nodes", Done: 7}, "nodes 7"},
		{Update{Step: "copying", Done: 1_500_000, Total: 3_000_000, Unit: Bytes}, "copying 1.5/3.0 MB (50%)"},
		{Update{Step: "reading", Done: 2_000_000, Unit: Bytes}, "reading 2.0 MB"},
	} {
		if got := tc.u.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.u, got, tc.want)
		}
	}
}

func TestFuncReportNil(t *testing.T) {
	var f Func
	f.Report(Update{Step: "x"}) // no panic: a nil Func receives nothing
	var got []Update
	f = func(u Update) { got = append(got, u) }
	f.Report(Update{Step: "x", Done: 1})
	if len(got) != 1 || got[0].Done != 1 {
		t.Errorf("Report handed %v", got)
	}
}

func TestTerminalStepEndedOtherwiseLeavesNothing(t *testing.T) {
	term, out, c := newTestTerminal(80)
	term.Report(Update{Step: "snapshot restored", Total: 100, Unit: Bytes})
	c.advance(ShowAfter)
	term.Report(Update{Step: "snapshot restored", Done: 10, Total: 100, Unit: Bytes})
	out.Reset()
	// Failed part-way.
	term.Report(Update{Step: "snapshot restored", Done: 10, Total: 100, Unit: Bytes, End: true})
	if got := out.String(); got != eraseLine {
		t.Errorf("a step that failed writes %q, want only %q", got, eraseLine)
	}
}
