package app

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kubeboot/kubeboot/internal/platform/version"
)

// printVersion prints kubeboot's version line.
func printVersion(cmd *cobra.Command) {
	info := version.Get()
	commit := info.GitCommit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit == "" {
		// Go records the checkout's commit in `go build`'s and `go
		// install`'s binaries, unless GOFLAGS has -buildvcs=false, and
		// never in `go run`'s.
		commit = "unknown: go build -buildvcs=true records it"
	} else if info.GitTreeState == "dirty" {
		commit += "-dirty"
	}
	fmt.Fprintf(cmd.OutOrStdout(), "kubeboot %s (commit %s, Kubernetes %s, %s, %s)\n", version.Kubeboot, commit, info.GitVersion, info.GoVersion, info.Platform)
}

// versionRequested reports whether --version was given. Upstream's
// components register it on the process-wide flag set, which cobra adds
// to every command; kube-controller-manager and kube-scheduler answer it
// themselves, and the other commands print kubeboot's version.
func versionRequested(cmd *cobra.Command) bool {
	f := cmd.Flags().Lookup("version")
	return f != nil && f.Changed && f.Value.String() != "false"
}

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
				printVersion(cmd)
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
