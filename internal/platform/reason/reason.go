// Package reason is an error that carries its reason: the CamelCase word
// a controller's Warning Event and status condition give for it (a
// manifest that is invalid, a chart not found), where the error's
// message says the rest.
package reason

import (
	"errors"
	"fmt"
)

// Error is an error with its reason.
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Wrap gives err the reason; nil stays nil.
func Wrap(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Reason: reason, Err: err}
}

// Errorf is fmt.Errorf's error with the reason.
func Errorf(reason, format string, args ...any) error {
	return &Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// Of is the reason of the first Error in err's chain, else fallback.
func Of(err error, fallback string) string {
	if e := (*Error)(nil); errors.As(err, &e) {
		return e.Reason
	}
	return fallback
}
