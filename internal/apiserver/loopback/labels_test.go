package loopback

import (
	"bytes"
	"context"
	"net/http"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/kubeboot/kubeboot/internal/platform/cpulabels"
)

// TestServedAsTheServersForTheClient checks that, profiled, a request's
// handling is the API server's for the component that made it, by both
// ways in: RoundTrip, and DialContext's connections (served by one
// goroutine that the first dialler started).
func TestServedAsTheServersForTheClient(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(*Transport) *http.Client
	}{
		{"RoundTrip", func(tr *Transport) *http.Client { return &http.Client{Transport: tr} }},
		{"DialContext", dialClient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Transport{}
			profiles := make(chan string, 2)
			tr.SetHandler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				var b bytes.Buffer
				_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
				profiles <- b.String()
			}))
			defer tr.SetHandler(nil)
			client := tc.client(tr)
			// Two components in turn: the second's requests ride a
			// connection of its own, served by the goroutine the first's
			// dial started.
			// Named apart from the other subtest's, whose goroutines may
			// still be ending.
			for _, component := range []string{tc.name + " kube-scheduler", tc.name + " kube-controller-manager"} {
				cpulabels.Do(t.Context(), component, func(ctx context.Context) {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://apiserver/healthz", nil)
					resp, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
				})
				want := `# labels: {"client":"` + component + `", "component":"kube-apiserver"}`
				if p := <-profiles; !strings.Contains(p, want) {
					t.Errorf("no goroutine is labelled %s while the handler serves it", want)
				}
				// A new connection for the next component.
				client.CloseIdleConnections()
			}
		})
	}
}
