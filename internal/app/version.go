package app

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kubeboot/kubeboot/internal/version"
)

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print kubeboot's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			switch output {
			case "":
				fmt.Fprintf(cmd.OutOrStdout(), "kubeboot %s (Kubernetes %s, %s, %s)\n", version.Kubeboot, info.GitVersion, info.GoVersion, info.Platform)
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			default:
				return fmt.Errorf("--output %q: must be json or empty", output)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: empty or json.")
	return cmd
}
