package app

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/app/options"
	"github.com/kubeboot/kubeboot/internal/memtrim"
)

// releaseStartupMemory gives back, once the server is ready and its first
// controller passes are done, the executable pages only start-up needed
// and, unless GOGC is set, the heap start-up left behind; then the
// collector's target follows the load (gcByLoad).
func releaseStartupMemory(ctx context.Context, ready <-chan struct{}, tuneGC bool) {
	select {
	case <-ready:
	case <-ctx.Done():
		return
	}
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
		return
	}
	if tuneGC {
		debug.SetGCPercent(idleGCPercent)
		debug.FreeOSMemory()
	}
	n, err := memtrim.ReleaseStartupPages()
	klog.FromContext(ctx).V(2).Info("Released start-up pages of the executable", "bytes", n, "err", err)
	if tuneGC {
		gcByLoad(ctx)
	}
}

func newAPIServerCommand() *cobra.Command {
	o := options.NewAPIServer()
	cmd := &cobra.Command{
		Use:     "apiserver",
		Aliases: []string{"kube-apiserver"},
		Short:   "Run the Kubernetes API server",
		Long: `Run the Kubernetes API server. By default etcd runs embedded in --data-dir, and
certificates and admin.kubeconfig are generated there on first start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tuneGC := os.Getenv("GOGC") == ""
			if tuneGC {
				debug.SetGCPercent(startupGCPercent)
			}
			if err := o.Validate(); err != nil {
				return err
			}
			completed, err := o.Config().Complete()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			logger := klog.FromContext(ctx)
			for _, w := range completed.Warnings() {
				logger.Info("Warning: " + w)
			}
			srv, err := controlplane.New(ctx, completed)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "kubeboot apiserver serving on %s\nadmin kubeconfig: %s\n", srv.URL(), srv.AdminKubeconfig())
			go releaseStartupMemory(ctx, srv.Ready(), tuneGC)
			return srv.Run(ctx)
		},
	}
	o.AddFlags(cmd.Flags())
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	cmd.Flags().AddGoFlag(klogFlags.Lookup("v"))
	cmd.Flags().AddGoFlag(klogFlags.Lookup("vmodule"))
	return cmd
}
