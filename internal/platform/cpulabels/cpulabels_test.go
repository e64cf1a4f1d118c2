package cpulabels

import (
	"bytes"
	"context"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

// labelled reports whether a goroutine of the process carries exactly
// labels, as the goroutine profile (which CPU profiles' labels come from
// the same place as) prints them.
func labelled(t *testing.T, labels string) bool {
	t.Helper()
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	return strings.Contains(b.String(), "# labels: "+labels+"\n")
}

func TestLabels(t *testing.T) {
	for _, tc := range []struct {
		name string
		// start starts a goroutine, labelled as the case says, that
		// calls block.
		start func(ctx context.Context, block func())
		want  string
	}{{
		name: "a component's goroutine",
		start: func(ctx context.Context, block func()) {
			Do(ctx, "kube-scheduler", func(context.Context) { go block() })
		},
		want: `{"component":"kube-scheduler"}`,
	}, {
		name: "the server's, serving a component",
		start: func(ctx context.Context, block func()) {
			Do(ctx, "simulated nodes", func(ctx context.Context) {
				go func() { Serving(ctx, "kube-apiserver"); block() }()
			})
		},
		want: `{"client":"simulated nodes", "component":"kube-apiserver"}`,
	}, {
		name: "the server's, serving a request from outside any component",
		start: func(ctx context.Context, block func()) {
			go func() { Serving(ctx, "kube-apiserver"); block() }()
		},
		want: `{"component":"kube-apiserver"}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			// Another run's goroutine (-count) may be still ending.
			for deadline := time.Now().Add(time.Second); labelled(t, tc.want); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("a goroutine is labelled %s before the test starts one", tc.want)
				}
			}
			started, stop, stopped := make(chan struct{}), make(chan struct{}), make(chan struct{})
			tc.start(t.Context(), func() {
				defer close(stopped)
				close(started)
				<-stop
			})
			<-started
			if !labelled(t, tc.want) {
				t.Errorf("no goroutine is labelled %s", tc.want)
			}
			close(stop)
			<-stopped
		})
	}
}
