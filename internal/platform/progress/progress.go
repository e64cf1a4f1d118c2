// Package progress tells a user at a terminal how far the long steps of a
// start have come: restoring an etcd snapshot, installing many CRDs,
// simulated nodes coming up. The steps report Updates to a Func; a
// Terminal shows them on the last line of the terminal, below what the
// server writes there, and only for steps that last.
package progress

// Unit is what a step counts.
type Unit int

const (
	// Items are things: CRDs, nodes.
	Items Unit = iota
	// Bytes are bytes of a file.
	Bytes
)

// Update is how far one step has come.
type Update struct {
	// Step names the step, as the user reads it ("CRDs established").
	Step string
	// Done of Total units are done; Total 0 is not known (yet). An
	// update with Total > 0 and Done >= Total ends the step.
	Done, Total int64
	Unit        Unit
	// End ends the step however far it came: one of unknown length, or
	// one that failed.
	End bool
}

// Finished reports whether u ends its step.
func (u Update) Finished() bool { return u.End || (u.Total > 0 && u.Done >= u.Total) }

// Func receives the updates of steps, possibly from several goroutines
// at once. A nil Func receives none.
type Func func(Update)

// Report hands u to f, if there is one.
func (f Func) Report(u Update) {
	if f != nil {
		f(u)
	}
}
