package app

import (
	"context"

	"github.com/spf13/cobra"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"

	"github.com/kubeboot/kubeboot/internal/app/dispatch"
	"github.com/kubeboot/kubeboot/internal/components/kubelethost"
)

// newControllerManagerCommand is upstream's kube-controller-manager
// command, unchanged but for its name: its flags, leader election,
// secure serving of /healthz and /metrics, and every controller it runs
// by default.
func newControllerManagerCommand() *cobra.Command {
	return renamed(controllermanager.NewControllerManagerCommand(), "controller-manager", "Run the Kubernetes controller manager")
}

// newSchedulerCommand is upstream's kube-scheduler command, unchanged but
// for its name.
func newSchedulerCommand() *cobra.Command {
	return renamed(scheduler.NewSchedulerCommand(), "scheduler", "Run the Kubernetes scheduler")
}

// newProxyCommand is upstream's kube-proxy command, unchanged but for its
// name: its flags and config file, nftables, iptables and ipvs modes
// (--proxy-mode), health and metrics ports. It programs the host's network
// for Services, so it runs as root on a node.
func newProxyCommand() *cobra.Command {
	return renamed(proxy.NewProxyCommand(), "proxy", "Run the Kubernetes network proxy")
}

// newKubeletCommand is upstream's kubelet command, unchanged but for its
// name and a check first that the host can run it (cgroup v2, a CRI
// runtime), which says in one line why not.
func newKubeletCommand() *cobra.Command {
	cmd := renamed(kubelet.NewKubeletCommand(context.Background()), "kubelet", "Run the Kubernetes node agent (needs cgroup v2 and a CRI runtime)")
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if err := kubelethost.Local.Check(args); err != nil {
			return err
		}
		return run(c, args)
	}
	return cmd
}

// renamed gives an upstream command kubeboot's name for it, and as aliases
// the names a link to the binary may have for it.
func renamed(cmd *cobra.Command, use, short string) *cobra.Command {
	cmd.Use, cmd.Short, cmd.Aliases = use, short, dispatch.Aliases(use)
	return cmd
}
