package app

import (
	"context"

	"github.com/spf13/cobra"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"

	"github.com/kubeboot/kubeboot/internal/kubelethost"
)

// newControllerManagerCommand is upstream's kube-controller-manager
// command, unchanged but for its name: its flags, leader election,
// secure serving of /healthz and /metrics, and every controller it runs
// by default.
func newControllerManagerCommand() *cobra.Command {
	cmd := controllermanager.NewControllerManagerCommand()
	cmd.Use = "controller-manager"
	cmd.Aliases = []string{"kube-controller-manager"}
	cmd.Short = "Run the Kubernetes controller manager"
	return cmd
}

// newSchedulerCommand is upstream's kube-scheduler command, unchanged but
// for its name.
func newSchedulerCommand() *cobra.Command {
	cmd := scheduler.NewSchedulerCommand()
	cmd.Use = "scheduler"
	cmd.Aliases = []string{"kube-scheduler"}
	cmd.Short = "Run the Kubernetes scheduler"
	return cmd
}

// newProxyCommand is upstream's kube-proxy command, unchanged but for its
// name: its flags and config file, nftables, iptables and ipvs modes
// (--proxy-mode), health and metrics ports. It programs the host's network
// for Services, so it runs as root on a node.
func newProxyCommand() *cobra.Command {
	cmd := proxy.NewProxyCommand()
	cmd.Use = "proxy"
	cmd.Aliases = []string{"kube-proxy"}
	cmd.Short = "Run the Kubernetes network proxy"
	return cmd
}

// newKubeletCommand is upstream's kubelet command, unchanged but for its
// name and a check first that the host can run it (cgroup v2, a CRI
// runtime), which says in one line why not.
func newKubeletCommand() *cobra.Command {
	cmd := kubelet.NewKubeletCommand(context.Background())
	cmd.Use = "kubelet"
	cmd.Short = "Run the Kubernetes node agent (needs cgroup v2 and a CRI runtime)"
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if err := kubelethost.Local.Check(args); err != nil {
			return err
		}
		return run(c, args)
	}
	return cmd
}
