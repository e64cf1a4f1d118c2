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
			return runControlPlane(cmd, o.Validate, o.Config)
		},
	}
	o.AddFlags(cmd.Flags())
	addConfigFlag(cmd)
	addLogFlags(cmd)
	return cmd
}

func newServerCommand() *cobra.Command {
	o, err := options.NewServer()
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the Kubernetes control plane: API server, controller manager and scheduler in one process",
		Long: `Run the Kubernetes control plane in one process: the API server, and
kube-controller-manager and kube-scheduler talking to it in-process. By default etcd
runs embedded in --data-dir, and certificates and admin.kubeconfig are generated
there on first start.

The flags are kubeboot apiserver's, plus kube-controller-manager's and
kube-scheduler's that are tuned most; --controller-manager-arg and --scheduler-arg
pass any other flag of theirs.

With --node the host is a node too: the kubelet runs as a child process and
joins through the CSR flow, kube-proxy runs in the process (--kubelet-arg,
--proxy-arg).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err != nil {
				return err
			}
			return runControlPlane(cmd, o.Validate, o.Config)
		},
	}
	if err == nil {
		o.AddFlags(cmd.Flags())
	}
	addConfigFlag(cmd)
	addLogFlags(cmd)
	return cmd
}

// runControlPlane applies the --config file, validates the flags,
// completes the configuration and runs the control plane until the
// command's context is done.
func runControlPlane(cmd *cobra.Command, validate func() error, config func() controlplane.Config) error {
	tuneGC := os.Getenv("GOGC") == ""
	if tuneGC {
		debug.SetGCPercent(startupGCPercent)
	}
	warnings, err := applyConfigFile(cmd.Flags())
	if err != nil {
		return err
	}
	if err := validate(); err != nil {
		return err
	}
	completed, err := config().Complete()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	logger := klog.FromContext(ctx)
	for _, w := range append(warnings, completed.Warnings()...) {
		logger.Info("Warning: " + w)
	}
	if completed.ClusterReset {
		msg, err := controlplane.ResetCluster(ctx, completed)
		if err != nil {
			return err
		}
		fmt.Fprintln(cmd.ErrOrStderr(), msg)
		return nil
	}
	srv, err := controlplane.New(ctx, completed)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "kubeboot %s serving on %s\nadmin kubeconfig: %s\n", cmd.Name(), srv.URL(), srv.AdminKubeconfig())
	go releaseStartupMemory(ctx, srv.Ready(), tuneGC)
	return srv.Run(ctx)
}

// addLogFlags adds klog's verbosity flags.
func addLogFlags(cmd *cobra.Command) {
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	cmd.Flags().AddGoFlag(klogFlags.Lookup("v"))
	cmd.Flags().AddGoFlag(klogFlags.Lookup("vmodule"))
}
