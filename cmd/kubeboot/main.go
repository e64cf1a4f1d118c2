// Command kubeboot is a single-binary Kubernetes control plane: run
// `kubeboot apiserver`, or link the binary as kube-apiserver.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubeboot/kubeboot/internal/app"
)

func main() {
	// containerd's runc shim, a link to this binary, takes its own signals.
	app.RunShim(os.Args[0])
	// The first SIGTERM or SIGINT starts a graceful shutdown; a second one
	// kills the process (signal.NotifyContext stops catching after cancel).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := app.Run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
