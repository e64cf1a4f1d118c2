package benchserver

import (
	"os"
	"testing"
)

func TestReadMemory(t *testing.T) {
	m, err := ReadMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.Anon <= 0 || m.File <= 0 || m.Anon+m.File > m.RSS || m.RSS > m.Peak {
		t.Errorf("memory %+v: want anon and file > 0, their sum <= RSS <= peak", m)
	}
	if _, err := ReadMemory(-1); err == nil {
		t.Error("ReadMemory(-1) succeeded")
	}
}
