package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestServerComponentPorts: given --secure-port through
// --controller-manager-arg and --scheduler-arg, the in-process
// components serve their own port as their binaries do: /healthz to
// anyone, with each controller's check, and /metrics only to who the
// apiserver authenticates and allows (here the admin's client
// certificate; anonymous is forbidden).
func TestServerComponentPorts(t *testing.T) {
	cmPort, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	schedPort, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := harness.StartLocalServer(t, fmt.Sprintf("--controller-manager-arg=--secure-port=%d", cmPort),
		fmt.Sprintf("--scheduler-arg=--secure-port=%d", schedPort))
	admin, err := srv.Config()
	if err != nil {
		t.Fatal(err)
	}
	adminTLS, err := rest.TLSConfigFor(admin)
	if err != nil {
		t.Fatal(err)
	}
	// The components serve with certificates of their own, self-signed
	// in memory, as their binaries do without --cert-dir.
	adminTLS.RootCAs, adminTLS.InsecureSkipVerify = nil, true
	asAdmin := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: adminTLS}}
	anonymous := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

	for _, c := range []struct {
		component string
		port      int
		path      string
		check     string // a line of path's verbose answer
	}{
		{"kube-controller-manager", cmPort, "/healthz", "[+]garbage-collector-controller ok"},
		{"kube-scheduler", schedPort, "/readyz", "[+]sched-handler-sync ok"},
	} {
		t.Run(c.component, func(t *testing.T) {
			base := fmt.Sprintf("https://127.0.0.1:%d", c.port)
			// The port opens once the component starts, after /readyz.
			harness.Eventually(t, 30*time.Second, c.component+" "+c.path, func(ctx context.Context) (bool, string) {
				code, body := get(ctx, anonymous, base+c.path+"?verbose")
				return code == http.StatusOK && strings.Contains(body, c.check), fmt.Sprintf("%d %s", code, body)
			})
			ctx := context.Background()
			if code, body := get(ctx, anonymous, base+"/metrics"); code != http.StatusForbidden {
				t.Errorf("anonymous GET /metrics: %d, want 403: %.200s", code, body)
			}
			// The component loads the client CA from the cluster on its
			// own after it serves; until then a certificate is anonymous.
			harness.Eventually(t, 30*time.Second, c.component+" /metrics for the admin", func(ctx context.Context) (bool, string) {
				code, body := get(ctx, asAdmin, base+"/metrics")
				return code == http.StatusOK && strings.Contains(body, "# TYPE"), fmt.Sprintf("%d %.200s", code, body)
			})
		})
	}
}

// get returns the status and body of a GET, or 0 and the error.
func get(ctx context.Context, c *http.Client, url string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
