package app

import (
	"fmt"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// newCertificateCommand is k3s's `certificate` command for kubeboot's data
// dir: check lists the certificates with their expiry, rotate retires
// leaf certificates so that the server issues new ones.
func newCertificateCommand() *cobra.Command {
	dataDir := controlplane.DefaultDataDir()
	cmd := dataDirGroup("certificate", "Check and rotate the certificates in the data dir",
		"The server's data directory, whose pki holds the certificates.", &dataDir)

	check := &cobra.Command{
		Use:   "check",
		Short: "List every certificate with its expiry",
		Long: `List every certificate in the data dir's pki with its subject, expiry and status:
ok, "renews at start" (a leaf within 120 days of its expiry, which the server issues
anew at start and while it runs), "expires soon" (a CA within 120 days of its
expiry: CAs are never renewed on their own) or expired.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			certs, err := pki.Inspect(filepath.Join(dataDir, "pki"))
			if err != nil {
				return fmt.Errorf("--data-dir %s: %w", dataDir, err)
			}
			now := time.Now()
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tSUBJECT\tEXPIRES\tDAYS LEFT\tSTATUS")
			for _, c := range certs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", c.Name, c.Subject, c.NotAfter.UTC().Format(time.RFC3339),
					int(c.NotAfter.Sub(now).Hours()/24), c.Status(now))
			}
			return w.Flush()
		},
	}
	var services []string
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Retire leaf certificates so that new ones are issued",
		Long: `Move leaf certificates (all of them, or those --service names, by file name:
apiserver, admin, super-admin, front-proxy-client, apiserver-kubelet-client, ...) out of
the data dir's pki, into pki/retired-<time>. The server issues new ones at its next
start, and a running server at its next check of its certificates (the serving
certificate is then served without a restart). CAs are never rotated.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			to, err := pki.Retire(filepath.Join(dataDir, "pki"), services, time.Now())
			if err != nil {
				return fmt.Errorf("--service: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "retired to %s; new certificates are issued at the next start, or the next check of a running server\n", to)
			return nil
		},
	}
	rotate.Flags().StringSliceVar(&services, "service", nil, "Certificates to rotate, by name (repeatable); default: every leaf certificate.")
	cmd.AddCommand(check, rotate)
	return cmd
}
