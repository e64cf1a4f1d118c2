package app

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/app/options"
)

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
