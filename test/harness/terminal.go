package harness

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// OpenTerminal opens a pseudo-terminal cols columns wide: control reads
// what a program writes to tty, which the program gets as its standard
// error. Both close with the test.
func OpenTerminal(t testing.TB, cols int) (control, tty *os.File) {
	t.Helper()
	control, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { control.Close() })
	fd := int(control.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlocking the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("naming the pseudo-terminal: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: uint16(cols)}); err != nil {
		t.Fatalf("sizing the pseudo-terminal: %v", err)
	}
	return control, tty
}

// RenderTerminal returns the lines a terminal shows after raw was written
// to it: a carriage return goes back to the start of the line, and
// "ESC [ K" erases from there to its end. Other escape sequences are kept
// as they are.
func RenderTerminal(raw string) []string {
	var lines []string
	var line []rune
	col := 0
	rs := []rune(raw)
	for i := 0; i < len(rs); i++ {
		switch {
		case rs[i] == '\n':
			lines = append(lines, string(line))
			line, col = nil, 0
		case rs[i] == '\r':
			col = 0
		case strings.HasPrefix(string(rs[i:min(i+3, len(rs))]), "\x1b[K"):
			line = line[:col]
			i += 2
		default:
			if col < len(line) {
				line[col] = rs[i]
			} else {
				line = append(line, rs[i])
			}
			col++
		}
	}
	if len(line) > 0 {
		lines = append(lines, string(line))
	}
	return lines
}
