package app

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/app/configfile"
	"github.com/kubeboot/kubeboot/internal/app/options"
	"github.com/kubeboot/kubeboot/internal/platform/progress"
	"github.com/kubeboot/kubeboot/internal/platform/version"
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
	configfile.AddFlag(cmd)
	addLogFlags(cmd)
	addMemoryFlags(cmd)
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

Beside them the server runs what a cluster needs out of the box (--disable leaves
each out): cluster DNS (coredns), the local-path StorageClass and its provisioners
(local-storage), LoadBalancer Services on the nodes' addresses (servicelb),
NetworkPolicy enforcement on the nodes (network-policy), resource metrics
(metrics-server), the HelmChart controller (--disable-helm-controller) and the
manifests in <data-dir>/server/manifests.

The flags are kubeboot apiserver's, plus kube-controller-manager's and
kube-scheduler's that are tuned most; --controller-manager-arg and --scheduler-arg
pass any other flag of theirs.

With --node the host is a node too: containerd (embedded) and the kubelet run as
child processes, the kubelet joining through the CSR flow; kube-proxy and the pod
network (flannel) run in the process (--kubelet-arg, --proxy-arg). Agents join
with the token in <data-dir>/token (kubeboot agent).`,
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
	configfile.AddFlag(cmd)
	addLogFlags(cmd)
	addMemoryFlags(cmd)
	return cmd
}

// runControlPlane applies the --config file, validates the flags,
// completes the configuration and runs the control plane until the
// command's context is done.
func runControlPlane(cmd *cobra.Command, validate func() error, config func() controlplane.Config) error {
	tuneGC := os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == ""
	if tuneGC {
		debug.SetGCPercent(startupGCPercent)
		debug.SetMemoryLimit(startupLimit(0))
	}
	warnings, err := configfile.Apply(cmd.Flags())
	if err != nil {
		return err
	}
	if err := validate(); err != nil {
		return err
	}
	limit, err := processMemoryLimit(cmd.Flags())
	if err != nil {
		return err
	}
	start := time.Now()
	stderr := cmd.ErrOrStderr()
	cfg := config()
	tty := terminalOf(stderr)
	if tty != nil {
		defer tty.Clear()
		stderr = tty
	}
	logs := routeLogs(cmd, stderr)
	if tty != nil && logs != nil {
		// Not with every log line on the terminal: they would bury it.
		cfg.Progress = tty.Report
	}
	completed, err := cfg.Complete()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	for _, w := range append(warnings, completed.Warnings()...) {
		fmt.Fprintln(stderr, "Warning: "+w)
	}
	if completed.ClusterReset {
		msg, err := controlplane.ResetCluster(ctx, completed)
		if err != nil {
			return err
		}
		fmt.Fprintln(stderr, msg)
		return nil
	}
	srv, err := controlplane.New(ctx, completed)
	if err != nil {
		return err
	}
	info := version.Get()
	fmt.Fprintf(stderr, "kubeboot %s (Kubernetes %s), data dir %s\n", version.Kubeboot, info.GitVersion, srv.DataDir())
	if logs != nil {
		path, err := logs.open(srv.DataDir())
		if err != nil {
			return fmt.Errorf("--data-dir %s: the log file: %w", srv.DataDir(), err)
		}
		fmt.Fprintf(stderr, "logs: %s (errors also here; --log-to-stderr or -v for all)\n", path)
	}
	fmt.Fprintf(stderr, "kubeboot %s serving on %s\nadmin kubeconfig: %s\n", cmd.Name(), srv.URL(), srv.AdminKubeconfig())
	go func() {
		select {
		case <-srv.Ready():
			fmt.Fprintf(stderr, "ready in %d ms\n%s\n", time.Since(start).Milliseconds(), nextSteps(cmd.Name(), srv))
		case <-ctx.Done():
		}
	}()
	go releaseStartupMemory(ctx, srv.Ready(), gcSettings{tune: tuneGC, limit: limit})
	return srv.Run(ctx)
}

// nextSteps is what the first screen suggests trying once the server is
// ready.
func nextSteps(command string, srv *controlplane.Server) string {
	kubectl := "kubeboot kubectl"
	if srv.DataDir() != controlplane.DefaultDataDir() {
		kubectl += " --kubeconfig " + srv.AdminKubeconfig()
	}
	if command != "server" {
		return "try: " + kubectl + " get namespaces"
	}
	return "try: " + kubectl + " get nodes (none? start with --simulated-nodes=3, or --node on a host with a container runtime)"
}

// terminalOf returns a progress.Terminal writing to w if w is a
// terminal, nil otherwise (a file, a pipe, the journal).
func terminalOf(w io.Writer) *progress.Terminal {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		width = 0
	}
	return progress.NewTerminal(f, width)
}
