package loopback

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/endpoints/responsewriter"
)

func newClient(h http.Handler) *http.Client {
	t := &Transport{}
	t.SetHandler(h)
	return &http.Client{Transport: t}
}

func TestRoundTrip(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Seen", strings.Join([]string{r.Method, r.RequestURI, r.URL.Path, r.URL.Query().Get("a"),
			r.Host, r.Header.Get("Authorization"), r.RemoteAddr, string(body)}, "|"))
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "made")
	})
	tests := []struct {
		name, method, url, body string
		wantStatus              int
		wantSeen, wantBody      string
	}{
		{"get", http.MethodGet, "https://10.0.0.1:6443/api/v1/namespaces?a=b%20c", "", 201,
			"GET|/api/v1/namespaces?a=b%20c|/api/v1/namespaces|b c|10.0.0.1:6443|Bearer t|127.0.0.1:0|", "made"},
		{"post with body", http.MethodPost, "https://h/apis/x", `{"kind":"X"}`, 201,
			`POST|/apis/x|/apis/x||h|Bearer t|127.0.0.1:0|{"kind":"X"}`, "made"},
		{"head has no body", http.MethodHead, "https://h/healthz", "", 201,
			"HEAD|/healthz|/healthz||h|Bearer t|127.0.0.1:0|", ""},
	}
	client := newClient(h)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req, err := http.NewRequest(tt.method, tt.url, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer t")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("reading body: %v", err)
			}
			if resp.StatusCode != tt.wantStatus || resp.Status != "201 Created" {
				t.Errorf("status = %d %q, want %d", resp.StatusCode, resp.Status, tt.wantStatus)
			}
			if s := resp.Header.Get("X-Seen"); s != tt.wantSeen {
				t.Errorf("handler saw %q, want %q", s, tt.wantSeen)
			}
			if string(got) != tt.wantBody {
				t.Errorf("body = %q, want %q", got, tt.wantBody)
			}
		})
	}
}

// A request made before the handler is set waits for it, as long as its
// context lasts; once the handler is cleared, requests fail at once.
func TestNoHandler(t *testing.T) {
	tr := &Transport{}
	client := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://h/readyz", nil)
	if _, err := client.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("before SetHandler, past the request's deadline: err = %v, want %v", err, context.DeadlineExceeded)
	}
	waited := make(chan *http.Response, 1)
	go func() {
		resp, err := client.Get("https://h/readyz")
		if err != nil {
			t.Error(err)
		}
		waited <- resp
	}()
	time.Sleep(20 * time.Millisecond)
	tr.SetHandler(http.NotFoundHandler())
	resp := <-waited
	if resp == nil {
		t.Fatal("the request made before SetHandler failed")
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("status = %d, want 404", resp.StatusCode)
	}
	tr.SetHandler(nil)
	if _, err := client.Get("https://h/readyz"); !errors.Is(err, ErrNotServing) {
		t.Fatalf("after SetHandler(nil): err = %v, want ErrNotServing", err)
	}
}

func TestEmptyHandlerAnswers200(t *testing.T) {
	resp, err := newClient(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).Get("https://h/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || len(b) != 0 {
		t.Fatalf("got %d %q, want 200 and no body", resp.StatusCode, b)
	}
}

// A watch: the header arrives on Flush, events stream as written, and
// closing the body ends the handler's request context.
func TestStreamingAndClientClose(t *testing.T) {
	handlerDone := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The apiserver wraps writers so; Flush must survive the wrapping.
		w = responsewriter.WrapForHTTP1Or2(&decorator{w})
		flusher, ok := w.(http.Flusher)
		if !ok {
			handlerDone <- errors.New("no http.Flusher through the apiserver's wrapper")
			return
		}
		w.WriteHeader(http.StatusOK)
		flusher.Flush()
		for i := 0; ; i++ {
			if _, err := io.WriteString(w, "event\n"); err != nil {
				break
			}
			flusher.Flush()
		}
		<-r.Context().Done()
		handlerDone <- nil
	})
	resp, err := newClient(h).Get("https://h/watch")
	if err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(resp.Body)
	for i := 0; i < 3; i++ {
		if !lines.Scan() || lines.Text() != "event" {
			t.Fatalf("event %d: %q, %v", i, lines.Text(), lines.Err())
		}
	}
	resp.Body.Close()
	select {
	case err := <-handlerDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler still running 5s after the client closed the body")
	}
}

type decorator struct{ http.ResponseWriter }

func (d *decorator) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// A client that gives up before the header gets its context's error, and
// the handler is cancelled.
func TestClientCancelBeforeHeader(t *testing.T) {
	handlerDone := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		close(handlerDone)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://h/slow", nil)
	if _, err := newClient(h).Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	select {
	case <-handlerDone:
	case <-time.After(5 * time.Second):
		t.Fatal("handler not cancelled")
	}
}

// A handler that aborts (as the apiserver's timeout filter does with
// http.ErrAbortHandler) fails the request, or cuts a streaming body short;
// the process lives on.
func TestHandlerAbort(t *testing.T) {
	client := newClient(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "part")
		if r.URL.Path == "/streaming" {
			w.(http.Flusher).Flush()
		}
		panic(http.ErrAbortHandler)
	}))
	if _, err := client.Get("https://h/buffered"); err == nil {
		t.Fatal("abort of a buffered response: want an error")
	}
	resp, err := client.Get("https://h/streaming")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("abort of a streaming response: want a body error")
	}
}

// A small response is complete before the client sees it: closing it
// unread does not cancel the handler, and its length is known. A large
// one streams whole.
func TestBuffering(t *testing.T) {
	cancelled := make(chan bool, 1)
	client := newClient(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		_, _ = w.Write(bytes.Repeat([]byte("x"), n))
		cancelled <- r.Context().Err() != nil
	}))
	for _, n := range []int{0, 10, bufferSize, bufferSize + 1, 4 * bufferSize} {
		resp, err := client.Get("https://h/?n=" + strconv.Itoa(n))
		if err != nil {
			t.Fatal(err)
		}
		if n <= bufferSize {
			if resp.ContentLength != int64(n) {
				t.Errorf("n=%d: ContentLength = %d", n, resp.ContentLength)
			}
			resp.Body.Close() // unread
			if <-cancelled {
				t.Errorf("n=%d: handler cancelled by a client that closed a complete response", n)
			}
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		<-cancelled
		if err != nil || len(b) != n || resp.ContentLength != -1 {
			t.Errorf("n=%d: read %d bytes, err %v, ContentLength %d", n, len(b), err, resp.ContentLength)
		}
	}
}

// clientValue is a context key only the client's context has.
type clientValue struct{}

// TestServerContext: the handler's context is a server's, not the
// client's: none of the client's values reach it (a handler calling its
// own server in-process would otherwise hand its audit and request
// state to the inner request), yet it ends when the client gives up.
func TestServerContext(t *testing.T) {
	seen := make(chan any, 1)
	ended := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Context().Value(clientValue{})
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(ended)
	})
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), clientValue{}, "outer request"))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://h/watch", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := newClient(h).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v := <-seen; v != nil {
		t.Errorf("the handler saw the client's context value %v", v)
	}
	cancel()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context did not end when the client gave up")
	}
}
