package reason

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"no reason", errors.New("plain"), "Failed"},
		{"nil", nil, "Failed"},
		{"wrapped", Wrap("Invalid", errors.New("bad")), "Invalid"},
		{"deeper in the chain", fmt.Errorf("file x: %w", Errorf("NotFound", "chart %s", "c")), "NotFound"},
		{"the outermost reason wins", Wrap("Outer", Wrap("Inner", errors.New("e"))), "Outer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Of(tc.err, "Failed"); got != tc.want {
				t.Errorf("Of = %q, want %q", got, tc.want)
			}
		})
	}
	if Wrap("Invalid", nil) != nil {
		t.Error("Wrap(reason, nil) is not nil")
	}
	err := Wrap("Missing", fs.ErrNotExist)
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != fs.ErrNotExist.Error() {
		t.Errorf("Wrap hides its error: %v", err)
	}
}
