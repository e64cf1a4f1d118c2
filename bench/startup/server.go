//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// pollInterval is the pause between /readyz probes.
	pollInterval = 2 * time.Millisecond
	// probeTimeout bounds a single /readyz probe.
	probeTimeout = 250 * time.Millisecond
	// killAfter is how long stop waits after SIGTERM before SIGKILL.
	killAfter = 10 * time.Second
	// tailLines is how many stderr lines a failure report shows.
	tailLines = 20
	// servingPrefix and servingInfix frame the command's name in the
	// stderr line that announces the URL ("kubeboot server serving on ...").
	servingPrefix, servingInfix = "kubeboot ", " serving on "
)

// server is a running kubeboot process.
type server struct {
	cmd     *exec.Cmd
	started time.Time // just before exec
	log     *logTail
	// ready, when set, must also hold for the server to be ready: the
	// components lead and the controllers run (-server).
	ready func(context.Context) bool

	done    chan struct{} // closed once the process exited and stderr is drained
	waitErr error         // cmd.Wait's result, set before done is closed

	stopOnce sync.Once
}

// start execs bin with args. The child gets its own process group, so a
// Ctrl-C in the terminal reaches only the benchmark, which then stops the
// child itself; and it is killed if the benchmark dies.
func start(bin string, args ...string) (*server, error) {
	s := &server{log: newLogTail(), done: make(chan struct{})}
	s.cmd = exec.Command(bin, args...)
	// A non-*os.File writer makes exec pass stderr through a pipe that
	// it keeps draining until the process exits; Write never blocks.
	s.cmd.Stderr = s.log
	s.cmd.WaitDelay = time.Second // stop draining a second after exit
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	s.started = time.Now()
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	return s, nil
}

// stop sends SIGTERM, then SIGKILL if the process is still running after
// killAfter, and waits for it to exit. It returns nil only for a clean
// exit with status 0. It may be called more than once.
func (s *server) stop() error {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM) // fails only if already exited
		t := time.NewTimer(killAfter)
		defer t.Stop()
		select {
		case <-s.done:
		case <-t.C:
			// The whole process group, in case it has children.
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
	})
	<-s.done
	return s.waitErr
}

// exitErr describes how the process ended; call it only after done.
func (s *server) exitErr() error {
	if s.waitErr != nil {
		return s.waitErr
	}
	return errors.New(s.cmd.ProcessState.String())
}

// failure returns an error for msg and err with the last stderr lines.
func (s *server) failure(msg string, err error) error {
	if err != nil {
		msg += ": " + err.Error()
	}
	return fmt.Errorf("%s\n--- last %d lines of server stderr ---\n%s", msg, tailLines, s.log.tail())
}

// waitReady polls /readyz every pollInterval, with one reused client, and
// returns the time from exec to the first 200. It fails if the server
// exits, ctx ends, or -timeout passes first.
func (b *bench) waitReady(ctx context.Context, s *server) (time.Duration, error) {
	deadline := time.NewTimer(b.timeout - time.Since(s.started))
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var url string
	var poll <-chan time.Time // nil until the URL is known
	for {
		select {
		case url = <-s.log.url:
			poll = tick.C
		case <-poll:
		case <-s.done:
			return 0, s.failure("exited before ready", s.exitErr())
		case <-deadline.C:
			return 0, s.failure(errTimeout.Error(), nil)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if at, ok := b.probe(ctx, url+"/readyz"); ok && (s.ready == nil || s.ready(ctx)) {
			return at.Sub(s.started), nil
		}
	}
}

// probe sends one GET and reports when a 200 response arrived.
func (b *bench) probe(ctx context.Context, url string) (time.Time, bool) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return time.Time{}, false
	}
	resp, err := b.client.Do(req)
	at := time.Now()
	if err != nil {
		return at, false
	}
	// Drain the body so that the connection is reused.
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return at, resp.StatusCode == http.StatusOK
}

// logTail is an io.Writer for the server's stderr. It keeps the last
// tailLines lines and sends the URL from the "serving on" line on url.
type logTail struct {
	url chan string // buffered; receives one URL

	mu      sync.Mutex
	partial []byte   // an unterminated last line
	lines   []string // at most tailLines
	found   bool
}

func newLogTail() *logTail { return &logTail{url: make(chan string, 1)} }

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.line(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
}

func (l *logTail) line(s string) {
	if rest, ok := strings.CutPrefix(s, servingPrefix); ok && !l.found {
		if _, u, ok := strings.Cut(rest, servingInfix); ok {
			l.found = true
			l.url <- strings.TrimSpace(u)
		}
	}
	if len(l.lines) == tailLines {
		l.lines = l.lines[1:]
	}
	l.lines = append(l.lines, s)
}

// announce sends url as if the server had printed it (for servers that
// print no such line and were given their port).
func (l *logTail) announce(url string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.found {
		l.found = true
		l.url <- url
	}
}

// tail returns the last lines, including an unterminated one.
func (l *logTail) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.lines
	if len(l.partial) > 0 {
		lines = append(lines[:len(lines):len(lines)], string(l.partial))
	}
	return strings.Join(lines, "\n")
}
