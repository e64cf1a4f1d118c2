// Package app holds kubeboot's commands: dispatch on the name the binary is
// invoked as (hyperkube style), the server commands and `version`. It is
// the only code that knows cobra.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kubeboot/kubeboot/internal/app/dispatch"
)

// Run executes the command line args (args[0] is the program name) and
// returns the process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand(stdout, stderr)
	rest := args[1:]
	if command := dispatch.CommandForName(args[0]); command != "" {
		rest = append([]string{command}, rest...)
	}
	root.SetArgs(rest)
	if err := root.ExecuteContext(ctx); errors.Is(err, errVersionPrinted) {
		return 0
	} else if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}
	return 0
}

// errVersionPrinted ends a command that was asked for --version.
var errVersionPrinted = errors.New("version printed")

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubeboot",
		Short: "A lean Kubernetes control plane in one binary",
		Long: `kubeboot is a single-binary Kubernetes control plane. Run one of its servers:

  kubeboot server               API server, controller manager and scheduler in one process, with
                                cluster DNS, storage and load balancers (--node: this host a node too)
  kubeboot agent                this host as a node of a kubeboot server's cluster (containerd, kubelet, kube-proxy)
  kubeboot apiserver            the Kubernetes API server, on embedded or external etcd
  kubeboot controller-manager   kube-controller-manager
  kubeboot scheduler            kube-scheduler
  kubeboot proxy                kube-proxy (nftables or iptables)
  kubeboot kubelet              the kubelet (cgroup v2 and a CRI runtime such as containerd)

  kubeboot certificate check    list the data dir's certificates with their expiry
  kubeboot certificate rotate   retire leaf certificates so that new ones are issued
  kubeboot secrets-encrypt      status and rotate-keys of --secrets-encryption
  kubeboot etcd member          list and remove the members of the embedded etcd
  kubeboot etcd-snapshot        save, list, delete and prune snapshots of the embedded etcd
  kubeboot kubectl              kubectl, on the local admin kubeconfig when KUBECONFIG is unset
  kubeboot containerd           containerd 2, as a node runs it (runc shim: containerd's own, embedded by
                                release builds; this binary in a plain go build)
  kubeboot ctr                  containerd's ctr, on this host's node's containerd (namespace k8s.io)

A link to this binary named after a server (kube-apiserver,
kube-controller-manager, kube-scheduler, kube-proxy, kubelet) runs that
server; one named kubectl runs kubectl, containerd and ctr theirs.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if versionRequested(cmd) {
				printVersion(cmd)
				return errVersionPrinted
			}
			return nil
		},
		// Without a server, print help rather than doing nothing.
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newServerCommand(), newAgentCommand(), newAPIServerCommand(), newControllerManagerCommand(), newSchedulerCommand(), newProxyCommand(), newKubeletCommand(), newCertificateCommand(), newTokenCommand(), newSecretsEncryptCommand(), newEtcdCommand(), newEtcdSnapshotCommand(), newKubectlCommand(), newContainerdCommand(), newCtrCommand(), newVersionCommand())
	return root
}

// groupCommand is a command that only groups its subcommands: run alone,
// it prints its help.
func groupCommand(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
}

// dataDirGroup is a groupCommand whose subcommands work on a server's data
// dir: its --data-dir flag, described by usage, sets dataDir.
func dataDirGroup(use, short, usage string, dataDir *string) *cobra.Command {
	cmd := groupCommand(use, short)
	cmd.PersistentFlags().StringVar(dataDir, "data-dir", *dataDir, usage)
	return cmd
}
