package app

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/carotation"
	"github.com/kubeboot/kubeboot/internal/platform/clusterjoin"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// newCertificateCommand is k3s's `certificate` command for kubeboot's data
// dir: check lists the certificates with their expiry, rotate retires
// leaf certificates so that the server issues new ones, rotate-ca replaces
// the cluster's CAs and generate-ca makes new ones for it.
func newCertificateCommand() *cobra.Command {
	cmd, t := serverGroup("certificate", "Check and rotate the certificates and CAs", "its pki")

	check := &cobra.Command{
		Use:   "check",
		Short: "List every certificate with its expiry",
		Long: `List every certificate in the data dir's pki with its subject, expiry and status:
ok, "renews at start" (a leaf within 120 days of its expiry, which the server issues
anew at start and while it runs), "expires soon" (a CA within 120 days of its
expiry: CAs are never renewed on their own) or expired.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			certs, err := pki.Inspect(controlplane.PKIDirIn(t.dataDir))
			if err != nil {
				return fmt.Errorf("--data-dir %s: %w", t.dataDir, err)
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
certificate is then served without a restart). CAs are rotated by rotate-ca.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			to, err := pki.Retire(controlplane.PKIDirIn(t.dataDir), services, time.Now())
			if err != nil {
				return fmt.Errorf("--service: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "retired to %s; new certificates are issued at the next start, or the next check of a running server\n", to)
			return nil
		},
	}
	rotate.Flags().StringSliceVar(&services, "service", nil, "Certificates to rotate, by name (repeatable); default: every leaf certificate.")
	cmd.AddCommand(check, rotate, t.rotateCACommand(), t.generateCACommand())
	return cmd
}

func (t *serverTarget) rotateCACommand() *cobra.Command {
	var path string
	var force bool
	cmd := &cobra.Command{
		Use:   "rotate-ca --path DIR",
		Short: "Replace the cluster's CAs and service account key; servers take them at their next start",
		Long: `Replace the cluster's CAs and service account key with those in --path, in k3s's layout
(DIR/tls, or DIR): server-ca and client-ca (kubeboot's one cluster CA: give one CA, as
either file or both), request-header-ca (the front proxy CA), etcd/server-ca and
etcd/peer-ca (the etcd CA: one CA likewise), each a .crt and its .key, and service.key.
A CA not given is kept.

Each new CA must be signed by the one it replaces (a cross-signed CA, as
generate-ca makes): the servers then keep trusting what the old CA issued, and serve
the new certificates with the cross-signed one, so that nodes, kubeconfigs and Pods that
trust the old CA keep working. service.key must hold the current key after the new one.
--force skips both checks and says what will break.

The rotation is kept in the cluster (the Secret kube-system/kubeboot-ca-rotation); every
server stages it in its pki and takes it at its next start: restart the servers, one at
a time, then the agents. The join tokens take the new CA's hash at once; they join with
it once every server has restarted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pkiDir := controlplane.PKIDirIn(t.dataDir)
			set, notes, err := carotation.Read(path, pkiDir, force)
			if err != nil {
				return fmt.Errorf("--path: %w", err)
			}
			for _, n := range notes {
				fmt.Fprintln(cmd.ErrOrStderr(), n)
			}
			c, err := t.client()
			if err != nil {
				return err
			}
			if err := carotation.Stage(cmd.Context(), c, set, pkiDir); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if caPEM, ok := set.Files[pki.CAName+".crt"]; ok {
				token, err := clusterjoin.Record{Client: c, TokenFile: controlplane.TokenFileIn(t.dataDir),
					AgentTokenFile: controlplane.AgentTokenFileIn(t.dataDir)}.Rehash(cmd.Context(), caPEM)
				if err != nil {
					return fmt.Errorf("the CAs are rotated, but the join tokens keep the old CA's hash: %w", err)
				}
				fmt.Fprintf(out, "the join token, once every server has restarted: %s\n", token)
			}
			fmt.Fprintln(out, "rotated: every server takes the new CAs at its next start; restart the servers one at a time, then the agents")
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "path", "", "The directory of the new CAs (k3s's layout: its tls directory, or itself).")
	cmd.Flags().BoolVar(&force, "force", false, "Replace CAs that the current ones did not sign, and a service account key without the current one.")
	_ = cmd.MarkFlagRequired("path")
	return cmd
}

func (t *serverTarget) generateCACommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "generate-ca --path DIR",
		Short: "Make new CAs, cross-signed by the current ones, for rotate-ca",
		Long: `Write new CAs into DIR/tls in k3s's layout (as k3s's rotate-default-ca-certs.sh does):
for each CA of the data dir's pki a new self-signed CA, with the same certificate signed by
the current CA after it in its file; and service.key: a new service account key followed by
the current one. Then: kubeboot certificate rotate-ca --path DIR.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pkiDir := controlplane.PKIDirIn(t.dataDir)
			if _, err := os.Stat(pkiDir); err != nil {
				return fmt.Errorf("--data-dir %s: %w", t.dataDir, err)
			}
			written, err := carotation.Generate(pkiDir, path)
			if err != nil {
				return fmt.Errorf("--path %s: %w", path, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s in %s\n", strings.Join(written, ", "), filepath.Join(path, "tls"))
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "path", "", "The directory to write the new CAs in (under tls/); it must not hold any yet.")
	_ = cmd.MarkFlagRequired("path")
	return cmd
}
