package simulatednodes

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
)

func TestKwokLog(t *testing.T) {
	tests := []struct {
		name string
		line string
		want string // what the logger got, funcr's rendering (its name first): errors have no "level"
	}{
		{
			"an error, with its err and attributes, as an unhandled error",
			`{"time":"2026-11-26T21:50:44Z","level":"ERROR","source":{"function":"f","file":"x.go","line":1},"msg":"failed to apply stage","err":"context canceled","node":"simulated-1","stage":"node-initialize"}`,
			`UnhandledError "msg"="failed to apply stage" "error"="context canceled" "node"="simulated-1" "stage"="node-initialize"`,
		},
		{
			"a warning, as info",
			`{"time":"2026-11-26T21:50:44Z","level":"WARN","msg":"slow","node":"simulated-2"}`,
			`"level"=0 "msg"="slow" "node"="simulated-2"`,
		},
		{
			"a warning with an err",
			`{"level":"WARN","msg":"retrying","err":"conflict"}`,
			`"level"=0 "msg"="retrying" "err"="conflict"`,
		},
		{
			"not JSON",
			`plain text`,
			`"level"=0 "msg"="plain text"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			logger := funcr.New(func(prefix, args string) { got = append(got, strings.TrimSpace(prefix+" "+args)) }, funcr.Options{})
			n, err := kwokLog{logger: logger}.Write([]byte(tc.line + "\n"))
			if err != nil || n != len(tc.line)+1 {
				t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(tc.line)+1)
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("logged %q, want [%q]", got, tc.want)
			}
		})
	}
	// Two records in one write are two lines.
	var got []string
	logger := funcr.New(func(_, args string) { got = append(got, args) }, funcr.Options{})
	_, _ = kwokLog{logger: logger}.Write([]byte(`{"level":"WARN","msg":"a"}` + "\n" + `{"level":"WARN","msg":"b"}` + "\n"))
	if len(got) != 2 || !strings.Contains(got[0], `"a"`) || !strings.Contains(got[1], `"b"`) {
		t.Errorf("two records logged as %q", got)
	}
}
