// Package loopback carries the apiserver's requests to itself in-process.
//
// kube-apiserver's own clients (its informers, the bootstrap controllers,
// the aggregator's and apiextensions' controllers) reach it over TLS on its
// serving port. A Transport instead hands each request straight to the
// server's handler chain: the same filters (authentication, audit,
// max-in-flight) run, with no TLS handshake or TCP in between, and — the
// point — requests are served before the listener accepts connections. So
// the informers of the chain's controllers can list while the server
// prepares to run, and are synced by the time the post-start hooks look.
package loopback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubeboot/kubeboot/internal/platform/cpulabels"
)

// ErrNotServing is returned for a request made after the handler is
// cleared, or made before it is set and not served within startWait.
var ErrNotServing = errors.New("loopback: the apiserver is not serving")

// startWait bounds how long a request made before the handler is set
// waits for it: the chain's admission plugins start their clients while
// the chain is built (the mutating policy plugin reads /openapi/v3 at
// once), a few hundred milliseconds before the handler is set, and a
// client of a server about to listen would retry its connection.
const startWait = 5 * time.Second

// bufferSize is how much of a response is held before it streams. Like
// net/http's server (whose response buffer and socket hold a small answer
// whole), a response that fits is complete before the client sees it, so a
// client that closes the body unread does not abort the handler; and a
// complete response carries its length.
const bufferSize = 64 << 10

// remoteAddr is the client address the handler sees: the requests come
// from this process, as loopback requests come from 127.0.0.1.
const remoteAddr = "127.0.0.1:0"

// Transport is an http.RoundTripper that serves requests by calling a
// handler in-process. The zero value holds requests until SetHandler.
type Transport struct {
	handler atomic.Pointer[http.Handler]
	// set is closed by the first SetHandler with a handler; stopped is
	// set by SetHandler(nil).
	setOnce, initOnce sync.Once
	set               chan struct{}
	stopped           atomic.Bool

	dialMu sync.Mutex
	dial   *pipeServer // serves DialContext's connections, once one was made
}

// SetHandler makes the transport dispatch to h; nil stops it: requests
// in flight through RoundTrip finish, connections made by DialContext are
// closed.
func (t *Transport) SetHandler(h http.Handler) {
	if h == nil {
		t.stopped.Store(true)
		t.handler.Store(nil)
		t.closeDial()
		return
	}
	t.handler.Store(&h)
	t.setOnce.Do(func() { close(t.setChan()) })
}

func (t *Transport) setChan() chan struct{} {
	t.initOnce.Do(func() { t.set = make(chan struct{}) })
	return t.set
}

// waitHandler is the handler, once it is set: a request made before
// waits for it, up to startWait or the end of ctx.
func (t *Transport) waitHandler(ctx context.Context) (*http.Handler, error) {
	if h := t.handler.Load(); h != nil {
		return h, nil
	}
	if t.stopped.Load() {
		return nil, ErrNotServing
	}
	timer := time.NewTimer(startWait)
	defer timer.Stop()
	select {
	case <-t.setChan():
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
	}
	if h := t.handler.Load(); h != nil {
		return h, nil
	}
	return nil, ErrNotServing
}

// RoundTrip implements http.RoundTripper. It returns once the handler has
// finished, or has flushed or outgrown bufferSize; from then on the body
// streams from the handler as it writes (a watch is served for as long as
// the body is read). Closing a streaming body, or cancelling the request's
// context, cancels the handler's request context.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	h, err := t.waitHandler(req.Context())
	if err != nil {
		closeBody(req)
		return nil, err
	}
	if req.URL == nil {
		closeBody(req)
		return nil, errors.New("loopback: request has no URL")
	}

	// The handler's context is a server's: it ends when the client gives
	// up, as a closed connection's does, but carries none of the client's
	// values. A request a handler makes of its own server (an allocator
	// storing an IPAddress during a Service create) must not look like
	// part of that handler's request to the filters (its audit event,
	// its request info).
	ctx, cancel := context.WithCancel(context.Background())
	stopClientCancel := context.AfterFunc(req.Context(), cancel)
	stream := newStreamPipe()
	w := newResponseWriter(stream, req.Method == http.MethodHead)
	stopCloseNotify := context.AfterFunc(ctx, w.notifyClose)
	go func() {
		// Profiled, the work is the API server's, for the component that
		// asked (this goroutine inherited its labels).
		cpulabels.Serving(req.Context(), cpulabels.APIServer)
		defer func() {
			// The handler has returned: as with net/http, its request
			// context ends now.
			stopCloseNotify()
			stopClientCancel()
			cancel()
			closeBody(req)
			if r := recover(); r != nil {
				// http.ErrAbortHandler (the timeout filter's way to cut a
				// response short) or a panic past the recovery filter: the
				// client sees a broken response, not a crashed process.
				w.fail(fmt.Errorf("loopback: handler aborted the response: %v", r))
				return
			}
			w.finish()
		}()
		(*h).ServeHTTP(w, serverRequest(ctx, req))
	}()

	select {
	case <-w.committed:
	case <-req.Context().Done():
		// The handler learns it through its context; whatever it still
		// streams fails at once.
		cancel()
		stream.CloseRead(req.Context().Err())
		return nil, req.Context().Err()
	}
	if w.err != nil {
		return nil, w.err
	}
	resp := &http.Response{
		Status:     strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode: w.status,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     w.sent,
		Request:    req,
	}
	if !w.streaming {
		resp.Body = io.NopCloser(bytes.NewReader(w.buf.Bytes()))
		resp.ContentLength = int64(w.buf.Len())
		if w.head {
			resp.ContentLength = -1
			if n, err := strconv.ParseInt(w.sent.Get("Content-Length"), 10, 64); err == nil && n >= 0 {
				resp.ContentLength = n
			}
		}
		return resp, nil
	}
	// The client gives up mid-stream: reads fail with its reason, as on a
	// network connection.
	stopReads := context.AfterFunc(req.Context(), func() {
		stream.CloseRead(req.Context().Err())
	})
	resp.Body = &responseBody{stream: stream, cancel: cancel, stopClientCancel: stopReads}
	resp.ContentLength = -1
	return resp, nil
}

// serverRequest is req as a server receives it: a request URI, a path-only
// URL, a remote address and a body that is never nil.
func serverRequest(ctx context.Context, req *http.Request) *http.Request {
	r := req.Clone(ctx)
	r.RequestURI = req.URL.RequestURI()
	r.URL = &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	if r.Host == "" {
		r.Host = req.URL.Host
	}
	r.RemoteAddr = remoteAddr
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, 1
	r.TLS = nil
	if r.Body == nil {
		r.Body = http.NoBody
	}
	return r
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// responseWriter is the handler's side of an in-process response. It
// buffers up to bufferSize; a Flush or a larger response commits it as a
// stream through a pipe to the client, which holds up to streamWindow
// unread from then on.
type responseWriter struct {
	header http.Header
	pipe   *streamPipe
	// head: the response has no body, whatever the handler writes.
	head bool
	// closeNotify receives true once the request is over for the client.
	closeNotify chan bool
	// committed is closed once the client may read status, sent, buf,
	// streaming and err, which do not change after that.
	committed chan struct{}

	mu        sync.Mutex
	status    int
	sent      http.Header
	buf       bytes.Buffer
	streaming bool
	done      bool
	err       error
}

func newResponseWriter(pipe *streamPipe, head bool) *responseWriter {
	return &responseWriter{
		header:      http.Header{},
		pipe:        pipe,
		head:        head,
		closeNotify: make(chan bool, 1),
		committed:   make(chan struct{}),
	}
}

// Header implements http.ResponseWriter.
func (w *responseWriter) Header() http.Header { return w.header }

// WriteHeader implements http.ResponseWriter. Informational (1xx) headers
// are dropped: nothing here waits for them.
func (w *responseWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHeaderLocked(code)
}

func (w *responseWriter) writeHeaderLocked(code int) {
	if w.status != 0 {
		return
	}
	w.status = code
	w.sent = w.header.Clone()
}

// Write implements http.ResponseWriter. Once streaming it blocks while
// the client has streamWindow unread.
func (w *responseWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.writeHeaderLocked(http.StatusOK)
	switch {
	case w.done:
		w.mu.Unlock()
		return 0, http.ErrHandlerTimeout
	case w.head:
		w.mu.Unlock()
		return len(p), nil
	case !w.streaming && w.buf.Len()+len(p) <= bufferSize:
		w.buf.Write(p)
		w.mu.Unlock()
		return len(p), nil
	}
	pending := w.streamLocked()
	w.mu.Unlock()
	if len(pending) > 0 {
		if _, err := w.pipe.Write(pending); err != nil {
			return 0, err
		}
	}
	return w.pipe.Write(p)
}

// Flush implements http.Flusher: it commits the response as a stream and
// sends what is buffered (a watch's client needs the header before the
// first event).
func (w *responseWriter) Flush() {
	w.mu.Lock()
	if w.done || w.head {
		w.mu.Unlock()
		return
	}
	w.writeHeaderLocked(http.StatusOK)
	pending := w.streamLocked()
	w.mu.Unlock()
	if len(pending) > 0 {
		_, _ = w.pipe.Write(pending)
	}
}

// streamLocked commits the response as a stream and returns what was
// buffered, for the caller to write to the pipe outside the lock.
func (w *responseWriter) streamLocked() []byte {
	if w.streaming {
		return nil
	}
	w.streaming = true
	pending := bytes.Clone(w.buf.Bytes())
	w.buf.Reset()
	close(w.committed)
	return pending
}

// CloseNotify implements http.CloseNotifier, which the apiserver's
// response writer wrappers require before they pass Flush through.
func (w *responseWriter) CloseNotify() <-chan bool { return w.closeNotify }

func (w *responseWriter) notifyClose() {
	select {
	case w.closeNotify <- true:
	default:
	}
}

// finish ends the response of a handler that returned: a buffered one is
// committed whole (a handler that wrote nothing answered 200), a stream
// ends.
func (w *responseWriter) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	w.writeHeaderLocked(http.StatusOK)
	if w.streaming {
		w.pipe.CloseWrite(nil)
		return
	}
	close(w.committed)
}

// fail ends the response of a handler that aborted: the request fails, or,
// when the response was already streaming, its body is cut short.
func (w *responseWriter) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	if w.streaming {
		w.pipe.CloseWrite(err)
		return
	}
	w.err = err
	close(w.committed)
}

// responseBody is the client's side of a streamed response; closing it
// cancels the handler's request.
type responseBody struct {
	stream           *streamPipe
	cancel           context.CancelFunc
	stopClientCancel func() bool
	once             sync.Once
}

func (b *responseBody) Close() error {
	b.once.Do(func() {
		b.stopClientCancel()
		b.cancel()
		b.stream.CloseRead(errBodyClosed)
	})
	return nil
}

func (b *responseBody) Read(p []byte) (int, error) { return b.stream.Read(p) }

var errBodyClosed = errors.New("loopback: response body closed")
