package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kubeboot/kubeboot/internal/agent"
	"github.com/kubeboot/kubeboot/internal/app/configfile"
	"github.com/kubeboot/kubeboot/internal/platform/version"
)

func newAgentCommand() *cobra.Command {
	o := agent.NewOptions()
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run this host as a node of a cluster of kubeboot servers: containerd, the kubelet and kube-proxy",
		Long: `Join the cluster of the server at --server with its token and run this host as
a node: containerd (embedded; needs runc and the CNI plugins) and the kubelet as
child processes (cgroup v2), and kube-proxy. The server's CA is checked against the token before
anything is sent; the node's name is bound to a password kept in --data-dir, so
no other host can take it over. A restart needs no flags but the data dir.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			warnings, err := configfile.Apply(cmd.Flags())
			if err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			for _, w := range warnings {
				fmt.Fprintln(stderr, "Warning: "+w)
			}
			logs := routeLogs(cmd, stderr)
			fmt.Fprintf(stderr, "kubeboot %s agent, node %s, data dir %s\n", version.Kubeboot, o.Node.NodeName(), o.DataDir)
			ctx := cmd.Context()
			return agent.Run(ctx, o, func() error {
				if logs == nil {
					return nil
				}
				path, err := logs.open(o.DataDir)
				if err != nil {
					return fmt.Errorf("--data-dir %s: the log file: %w", o.DataDir, err)
				}
				fmt.Fprintf(stderr, "logs: %s (errors also here; --log-to-stderr or -v for all)\n", path)
				return nil
			})
		},
	}
	o.AddFlags(cmd.Flags())
	configfile.AddFlag(cmd)
	addLogFlags(cmd)
	return cmd
}
