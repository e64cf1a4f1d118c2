package app

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/agent"
	"github.com/kubeboot/kubeboot/internal/components/containerruntime"
	"github.com/kubeboot/kubeboot/internal/components/containerruntime/embedded"
	"github.com/kubeboot/kubeboot/internal/components/hostnode"
)

// RunShim runs the runc shim and does not return when this process is
// one (embedded.IsShim): containerd starts it by a link to this binary,
// and it handles its own flags and signals, as its own binary does.
func RunShim(argv0 string) {
	if embedded.IsShim(argv0) {
		embedded.Shim(context.Background())
	}
}

// newContainerdCommand is containerd 2's own command, with the plugins a
// node uses; a node runs it as a child process (containerruntime).
func newContainerdCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "containerd",
		Short:              "Run containerd, as a node runs it (its own flags: --config FILE)",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			// containerd handles its own signals.
			signal.Reset(syscall.SIGINT, syscall.SIGTERM)
			return embedded.Containerd(context.WithoutCancel(cmd.Context()), append([]string{"containerd"}, args...))
		},
	}
}

// newCtrCommand is containerd's ctr, by default on the local node's
// containerd and the CRI plugin's namespace (k3s's `k3s ctr`).
func newCtrCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "ctr",
		Short:              "Run containerd's ctr, on this host's node's containerd and the k8s.io namespace unless told otherwise",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			signal.Reset(syscall.SIGINT, syscall.SIGTERM)
			if os.Getenv("CONTAINERD_ADDRESS") == "" {
				if sock := localNodeSocket(); sock != "" {
					_ = os.Setenv("CONTAINERD_ADDRESS", sock)
				}
			}
			if os.Getenv("CONTAINERD_NAMESPACE") == "" {
				_ = os.Setenv("CONTAINERD_NAMESPACE", containerruntime.CRINamespace)
			}
			return embedded.Ctr(context.WithoutCancel(cmd.Context()), append([]string{"ctr"}, args...))
		},
	}
}

// localNodeSocket is the embedded containerd's socket of this host's
// node in the default data dir: the server's (--node), else the agent's;
// "" if neither exists.
func localNodeSocket() string {
	for _, dir := range []string{hostnode.Dir(controlplane.DefaultDataDir()), agent.NewOptions().DataDir} {
		if sock := containerruntime.Socket(dir); fileExists(sock) {
			return sock
		}
	}
	return ""
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
