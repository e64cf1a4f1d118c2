package harness

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// FastMetricsArgs make a server's metrics-server scrape every 10 s (its
// least), so that usage is there within seconds of a Pod's start.
var FastMetricsArgs = []string{"--metrics-server-arg=--metric-resolution=10s", "--metrics-server-arg=--kubelet-request-timeout=5s"}

// StartLocalServer starts a ready `kubeboot server` on 127.0.0.1, a free
// port and a fresh data dir, Services in 10.96.0.0/16, and returns it
// with an admin client.
func StartLocalServer(t testing.TB, args ...string) (*APIServer, kubernetes.Interface) {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	srv := StartReadyServer(t, time.Minute, bin, filepath.Join(t.TempDir(), "data"),
		append([]string{"--bind-address", "127.0.0.1", "--secure-port", "0", "--service-cluster-ip-range", "10.96.0.0/16"}, args...)...)
	return srv, srv.MustClient(t)
}

// Eventually polls cond every 100ms until it holds, failing the test
// with what it last said after timeout (before the timeout cut a call
// short: that one would only say so).
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, state := cond(ctx)
		if ctx.Err() == nil || last == "" {
			last = state
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
	}
}

// Kubectl runs kubectl as s's admin and returns its standard output,
// failing the test if it fails.
func (s *APIServer) Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := s.KubectlOutput(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// KubectlOutput runs kubectl as s's admin and returns its standard
// output, or an error with its standard error.
func (s *APIServer) KubectlOutput(args ...string) (string, error) {
	path, err := Kubectl()
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(path, append([]string{"--kubeconfig", filepath.Join(s.DataDir, "admin.kubeconfig")}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// MetricsClient is a client of metrics.k8s.io as s's admin.
func (s *APIServer) MetricsClient(t testing.TB) metricsclient.Interface {
	t.Helper()
	config, err := s.Config()
	if err != nil {
		t.Fatal(err)
	}
	c, err := metricsclient.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
