package tunnel

import (
	"bytes"
	"io"
	"testing"
)

// FuzzReadLine: the first line of a tunnel stream (the address an agent
// is asked to dial) is read up to its newline and no further, and is
// bounded; none panics.
func FuzzReadLine(f *testing.F) {
	for _, s := range []string{"tcp 10.0.0.1:10250\nrest", "tcp6 [::1]:80\n", "\n", "no newline", string(make([]byte, maxLine+10))} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		line, err := readLine(r)
		if err != nil {
			return
		}
		if len(line) > maxLine || bytes.IndexByte([]byte(line), '\n') >= 0 {
			t.Errorf("readLine(%q) = %q: longer than %d, or holding a newline", data, line, maxLine)
		}
		rest, _ := io.ReadAll(r)
		if want := data[len(line)+1:]; !bytes.Equal(rest, want) {
			t.Errorf("readLine(%q) took %q past its line", data, data[len(line)+1:len(data)-len(rest)])
		}
	})
}
