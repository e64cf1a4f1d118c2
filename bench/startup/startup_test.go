//go:build linux

package main

import (
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want summary
	}{
		{[]float64{7}, summary{Median: 7, Min: 7, P90: 7, Max: 7}},
		{[]float64{3, 1, 2}, summary{Median: 2, Min: 1, P90: 3, Max: 3}},
		{[]float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, summary{Median: 5.5, Min: 1, P90: 9, Max: 10}},
	} {
		if got := summarize(tc.in); got != tc.want {
			t.Errorf("summarize(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestLogTail(t *testing.T) {
	l := newLogTail()
	l.Write([]byte("I0101 starting\nkubeboot apiserver serving on https://127.0.0.1:1234\nadmin kube"))
	if got := <-l.url; got != "https://127.0.0.1:1234" {
		t.Errorf("url = %q", got)
	}
	for range 2 * tailLines {
		l.Write([]byte("config\n"))
	}
	l.Write([]byte("last"))
	if got, want := l.tail(), strings.Repeat("config\n", tailLines)+"last"; got != want {
		t.Errorf("tail = %q, want %q", got, want)
	}
}
