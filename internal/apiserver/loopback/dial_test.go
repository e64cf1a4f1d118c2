package loopback

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// dialClient is an HTTP client that reaches t only through DialContext,
// as a copy of a client configuration without its Transport does.
func dialClient(t *Transport) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: t.DialContext}}
}

func TestDialContextServesTheHandler(t *testing.T) {
	tr := &Transport{}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://apiserver/healthz", nil)
	if _, err := dialClient(tr).Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("before SetHandler, past the request's deadline: %v, want %v", err, context.DeadlineExceeded)
	}
	tr.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, strings.Join([]string{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.RemoteAddr, string(body)}, "|"))
	}))
	client := dialClient(tr)
	for range 3 { // connections are reused
		req, _ := http.NewRequest(http.MethodPost, "http://apiserver/api/v1/pods", strings.NewReader("pod"))
		req.Header.Set("Authorization", "Bearer t")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "POST|/api/v1/pods|Bearer t|127.0.0.1:0|pod"; string(got) != want {
			t.Errorf("handler saw %q, want %q", got, want)
		}
	}
}

func TestDialContextStreamsAndStops(t *testing.T) {
	tr := &Transport{}
	events := make(chan string)
	tr.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case e := <-events:
				_, _ = io.WriteString(w, e)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	}))
	resp, err := dialClient(tr).Get("http://apiserver/api/v1/pods?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events <- "ADDED"
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "ADDED" {
		t.Fatalf("first event: %q, %v", buf, err)
	}

	// Stopping the transport ends the watch and refuses new connections.
	tr.SetHandler(nil)
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(resp.Body); done <- err }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch outlived SetHandler(nil)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := tr.DialContext(ctx, "tcp", "apiserver:80"); !errors.Is(err, ErrNotServing) {
		t.Errorf("after SetHandler(nil): %v, want %v", err, ErrNotServing)
	}
}
