package controlplane_test

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/apiserver/loopback"
)

// TestLoopbackServesBeforeListening checks the server's own clients reach
// it in-process: they are answered before the server accepts a connection
// (which is what lets the chain's informers sync while it prepares to
// run), and refused once it has stopped.
func TestLoopbackServesBeforeListening(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := controlplane.New(ctx, testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(controlplane.LoopbackConfig(srv))
	if err != nil {
		t.Fatal(err)
	}

	// Not running: over the network this would hang in the TLS handshake.
	reqCtx, reqCancel := context.WithTimeout(ctx, 10*time.Second)
	defer reqCancel()
	if _, err := client.CoreV1().Namespaces().List(reqCtx, metav1.ListOptions{}); err != nil {
		t.Fatalf("loopback list before Run: %v", err)
	}

	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not ready after 30s")
	}
	if _, err := client.CoreV1().Services("").List(reqCtx, metav1.ListOptions{}); err != nil {
		t.Fatalf("loopback get while running: %v", err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	_, err = client.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	if !errors.Is(err, loopback.ErrNotServing) {
		t.Fatalf("loopback list after stop: err = %v, want ErrNotServing", err)
	}
}
