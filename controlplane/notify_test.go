package controlplane_test

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeboot/kubeboot/controlplane"
)

// TestNotifiesSystemdWhenReady checks a server started under systemd (or a
// supervisor speaking its protocol) sends READY=1 to $NOTIFY_SOCKET once,
// and only when /readyz answers 200.
func TestNotifiesSystemdWhenReady(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)

	ctx, cancel := context.WithCancel(context.Background())
	srv, err := controlplane.New(ctx, testConfig(t))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	client, err := rest.HTTPClientFor(srv.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}

	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _, err := conn.ReadFromUnix(buf)
	if err != nil {
		t.Fatalf("no notification on $NOTIFY_SOCKET: %v", err)
	}
	// Right away: the notification must not come before readiness.
	resp, err := client.Get(srv.URL() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("notified %q while /readyz answered %d", buf[:n], resp.StatusCode)
	}
	if string(buf[:n]) != "READY=1" {
		t.Errorf("notification = %q, want READY=1", buf[:n])
	}
	if err := conn.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, _, err := conn.ReadFromUnix(buf); err == nil {
		t.Errorf("a second notification %q", buf[:n])
	}
}
