package loopback

import (
	"io"
	"sync"
)

// streamWindow is how much of a streamed response the handler may write
// ahead of the client's reads. Between kube-apiserver and a client of its
// own process the stream's HTTP/2 flow-control window (client-go's
// transport grants 4 MiB a stream) and the sockets' buffers hold that
// much; with none, every event a watch sends waits for the client to take
// it, a client's pause (a collection, a busy handler) stalls the watch
// cache's dispatch to that watcher, and the API server cuts the watcher
// off as too slow once its 100 queued events are full. The memory is
// used only while a client lags.
const streamWindow = 4 << 20

// keptWindow is the most a drained stream keeps allocated for its next
// writes.
const keptWindow = 64 << 10

// streamPipe is io.Pipe with a buffer: writes block only while
// streamWindow bytes wait unread. Its ends close as io.Pipe's do: after
// the writer closes, reads drain what is held, then fail with the
// writer's error (io.EOF for none); after the reader closes, writes fail
// with the reader's error (io.ErrClosedPipe for none), reads with
// io.ErrClosedPipe, and what is held is dropped.
type streamPipe struct {
	mu   sync.Mutex
	cond sync.Cond
	// mem[start:] is held unread.
	mem   []byte
	start int
	// werr and rerr are the writer's and the reader's close errors.
	werr, rerr error
}

func newStreamPipe() *streamPipe {
	p := &streamPipe{}
	p.cond.L = &p.mu
	return p
}

// Write implements io.Writer.
func (p *streamPipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for len(b) > 0 {
		for p.rerr == nil && p.werr == nil && p.held() >= streamWindow {
			p.cond.Wait()
		}
		switch {
		case p.rerr != nil:
			return n, p.rerr
		case p.werr != nil:
			return n, io.ErrClosedPipe
		}
		k := min(len(b), streamWindow-p.held())
		if p.start > 0 && cap(p.mem)-len(p.mem) < k {
			// Move what is unread to the front rather than grow.
			p.mem = p.mem[:copy(p.mem, p.mem[p.start:])]
			p.start = 0
		}
		p.mem = append(p.mem, b[:k]...)
		b, n = b[k:], n+k
		p.cond.Broadcast()
	}
	return n, nil
}

// Read implements io.Reader.
func (p *streamPipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.rerr == nil && p.werr == nil && p.held() == 0 {
		p.cond.Wait()
	}
	switch {
	case p.rerr != nil:
		return 0, io.ErrClosedPipe
	case p.held() == 0:
		return 0, p.werr
	}
	n := copy(b, p.mem[p.start:])
	p.start += n
	if p.held() == 0 {
		// Drained: the next writes start at the front, and a buffer a
		// burst grew is not kept by a watch gone quiet.
		p.mem, p.start = p.mem[:0], 0
		if cap(p.mem) > keptWindow {
			p.mem = nil
		}
	}
	p.cond.Broadcast()
	return n, nil
}

// held is how many bytes wait unread.
func (p *streamPipe) held() int { return len(p.mem) - p.start }

// CloseWrite closes the writer's end with err (io.EOF for nil).
func (p *streamPipe) CloseWrite(err error) {
	if err == nil {
		err = io.EOF
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.werr == nil {
		p.werr = err
	}
	p.cond.Broadcast()
}

// CloseRead closes the reader's end with err (io.ErrClosedPipe for nil).
func (p *streamPipe) CloseRead(err error) {
	if err == nil {
		err = io.ErrClosedPipe
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rerr == nil {
		p.rerr = err
	}
	p.mem, p.start = nil, 0
	p.cond.Broadcast()
}
