package loopback

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

// A writer runs ahead of its reader by up to streamWindow, then waits
// for reads; the reader gets every byte in order.
func TestStreamPipeHoldsAWindow(t *testing.T) {
	p := newStreamPipe()
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 1<<10) // 16 KiB
	written := make(chan int, 1)
	go func() {
		n := 0
		for n < streamWindow {
			k, err := p.Write(chunk)
			if err != nil {
				t.Error(err)
				break
			}
			n += k
		}
		written <- n
	}()
	select {
	case n := <-written:
		if n != streamWindow {
			t.Fatalf("wrote %d bytes unread, want %d", n, streamWindow)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writes blocked before the window was full")
	}

	blocked := make(chan error, 1)
	go func() {
		_, err := p.Write([]byte("more"))
		blocked <- err
	}()
	select {
	case err := <-blocked:
		t.Fatalf("a write past the window returned (%v) before any read", err)
	case <-time.After(50 * time.Millisecond):
	}
	got, err := io.ReadAll(io.LimitReader(p, streamWindow+4))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-blocked; err != nil {
		t.Fatalf("the write past the window, once read: %v", err)
	}
	want := append(bytes.Repeat(chunk, streamWindow/len(chunk)), "more"...)
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, not the %d written in order", len(got), len(want))
	}
}

// The ends close as io.Pipe's do.
func TestStreamPipeClose(t *testing.T) {
	errWriter, errReader := errors.New("writer gone"), errors.New("reader gone")
	for _, tc := range []struct {
		name     string
		close    func(*streamPipe)
		readAll  string // what a reader gets before its error
		readErr  error
		writeErr error
	}{
		{name: "writer closes", close: func(p *streamPipe) { p.CloseWrite(nil) }, readAll: "held", readErr: io.EOF, writeErr: io.ErrClosedPipe},
		{name: "writer fails", close: func(p *streamPipe) { p.CloseWrite(errWriter) }, readAll: "held", readErr: errWriter, writeErr: io.ErrClosedPipe},
		{name: "reader closes", close: func(p *streamPipe) { p.CloseRead(nil) }, readErr: io.ErrClosedPipe, writeErr: io.ErrClosedPipe},
		{name: "reader fails", close: func(p *streamPipe) { p.CloseRead(errReader) }, readErr: io.ErrClosedPipe, writeErr: errReader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newStreamPipe()
			if _, err := p.Write([]byte("held")); err != nil {
				t.Fatal(err)
			}
			tc.close(p)
			var got []byte
			buf := make([]byte, 2)
			var err error
			for {
				var n int
				n, err = p.Read(buf)
				got = append(got, buf[:n]...)
				if err != nil {
					break
				}
			}
			if string(got) != tc.readAll || !errors.Is(err, tc.readErr) {
				t.Errorf("read %q, %v; want %q, %v", got, err, tc.readAll, tc.readErr)
			}
			if _, err := p.Write([]byte("x")); !errors.Is(err, tc.writeErr) {
				t.Errorf("write after close: %v, want %v", err, tc.writeErr)
			}
		})
	}
}

// A reader waiting for data and a writer waiting for room both return
// once the other end closes.
func TestStreamPipeCloseWakesWaiters(t *testing.T) {
	p := newStreamPipe()
	read := make(chan error, 1)
	go func() {
		_, err := p.Read(make([]byte, 1))
		read <- err
	}()
	time.Sleep(10 * time.Millisecond)
	p.CloseWrite(nil)
	if err := <-read; !errors.Is(err, io.EOF) {
		t.Fatalf("waiting read: %v, want EOF", err)
	}

	p = newStreamPipe()
	wrote := make(chan error, 1)
	go func() {
		_, err := p.Write(make([]byte, streamWindow+1))
		wrote <- err
	}()
	time.Sleep(10 * time.Millisecond)
	p.CloseRead(errBodyClosed)
	if err := <-wrote; !errors.Is(err, errBodyClosed) {
		t.Fatalf("waiting write: %v, want %v", err, errBodyClosed)
	}
}
