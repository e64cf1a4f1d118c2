package app

import (
	"bytes"
	"errors"
	"flag"
	"log"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// TestRouteLogs: of the errors the components log, those handed to
// utilruntime.HandleError (retried, nothing to act on) are written to the
// log file only; those logged as errors reach the terminal too; info
// lines only the file.
func TestRouteLogs(t *testing.T) {
	handlers := utilruntime.ErrorHandlers
	t.Cleanup(func() {
		utilruntime.ErrorHandlers = handlers
		settings := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(settings)
		_ = settings.Set("logtostderr", "true")
		klog.SetOutput(os.Stderr)
		log.SetOutput(os.Stderr)
	})
	utilruntime.ErrorHandlers = append([]utilruntime.ErrorHandler(nil), handlers...)

	cmd := &cobra.Command{}
	addLogFlags(cmd)
	cmd.SetContext(t.Context())
	t.Setenv("JOURNAL_STREAM", "")
	var terminal bytes.Buffer
	f := routeLogs(cmd, &terminal)
	if f == nil {
		t.Fatal("routeLogs kept every line on standard error")
	}

	klog.ErrorS(errors.New("listen tcp: address in use"), "Component cannot start")
	klog.InfoS("Component started")
	utilruntime.HandleError(errors.New(`sync "default/web" failed with read version`))
	klog.Flush()

	file := f.buf.String()
	for _, c := range []struct {
		line     *regexp.Regexp
		terminal bool
	}{
		{regexp.MustCompile(`(?m)^E\d{4} .*logs_test.go:\d+\] "Component cannot start" err="listen tcp: address in use"$`), true},
		{regexp.MustCompile(`(?m)^I\d{4} .*"Component started"$`), false},
		// Upstream's line, at its caller, to the file only.
		{regexp.MustCompile(`(?m)^E\d{4} .*logs_test.go:\d+\] "Unhandled Error" err="sync \\"default/web\\" failed with read version" logger="UnhandledError"$`), false},
	} {
		if n := len(c.line.FindAllString(file, -1)); n != 1 {
			t.Errorf("the log file has %d lines matching %s, want 1:\n%s", n, c.line, file)
		}
		if got := c.line.MatchString(terminal.String()); got != c.terminal {
			t.Errorf("on the terminal: %v, want %v for %s; terminal:\n%s", got, c.terminal, c.line, terminal.String())
		}
	}
	if n := strings.Count(terminal.String(), "\n"); n != 1 {
		t.Errorf("%d lines on the terminal, want 1:\n%s", n, terminal.String())
	}
}
