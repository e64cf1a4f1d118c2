package app

import (
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's client auth plugins (oidc)
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/plugin"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/kubeboot/kubeboot/controlplane"
	// kubectl's translations, loaded only when kubectl runs.
	_ "github.com/kubeboot/kubeboot/internal/app/translations"
)

// newKubectlCommand is upstream's kubectl, with k3s's default: when
// neither KUBECONFIG nor --kubeconfig is given, the admin kubeconfig of
// the default data dir, if there is one.
func newKubectlCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "kubectl",
		Short:              "Run kubectl, on the default data dir's admin kubeconfig unless KUBECONFIG or --kubeconfig names another",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			// kubectl handles its own signals (exec, port-forward, watch):
			// Ctrl-C ends it, as it ends the kubectl binary.
			signal.Reset(syscall.SIGINT, syscall.SIGTERM)
			if path := defaultKubeconfig(args); path != "" {
				if err := os.Setenv("KUBECONFIG", path); err != nil {
					return err
				}
			}
			argv := append([]string{"kubectl"}, args...)
			_, _ = logs.GlogSetter(kubectlcmd.GetLogVerbosity(argv))
			streams := genericiooptions.IOStreams{In: cmd.InOrStdin(), Out: cmd.OutOrStdout(), ErrOut: cmd.ErrOrStderr()}
			kubectl := kubectlcmd.NewDefaultKubectlCommandWithArgs(kubectlcmd.KubectlOptions{
				PluginHandler: kubectlcmd.NewDefaultPluginHandler(plugin.ValidPluginFilenamePrefixes),
				Arguments:     argv,
				// kubectl's own defaults (its defaultConfigFlags).
				ConfigFlags: genericclioptions.NewConfigFlags(true).WithDeprecatedPasswordFlag().
					WithDiscoveryBurst(300).WithDiscoveryQPS(50.0).WithWarningPrinter(streams),
				IOStreams: streams,
			})
			kubectl.SetArgs(args)
			if err := cli.RunNoErrOutput(kubectl); err != nil {
				// kubectl's own way of printing an error and exiting 1.
				kubectlutil.CheckErr(err)
			}
			return nil
		},
	}
}

// defaultKubeconfig is the admin kubeconfig of the default data dir when
// args and the environment name no kubeconfig and it exists, else "".
func defaultKubeconfig(args []string) string {
	if os.Getenv("KUBECONFIG") != "" || slices.ContainsFunc(args, func(a string) bool {
		return a == "--kubeconfig" || strings.HasPrefix(a, "--kubeconfig=")
	}) {
		return ""
	}
	path := controlplane.AdminKubeconfigIn(controlplane.DefaultDataDir())
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}
