package app

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	bootstraptokenv1 "k8s.io/kubernetes/cmd/kubeadm/app/apis/bootstraptoken/v1"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/clusterjoin"
	"github.com/kubeboot/kubeboot/internal/platform/nodejoin"
	"github.com/kubeboot/kubeboot/internal/platform/secretsencryption"
)

// newTokenCommand is k3s's `token`: bootstrap tokens that join agents
// (create, list, delete, generate), and the rotation of the server token.
func newTokenCommand() *cobra.Command {
	cmd, t := serverGroup("token", "Manage the tokens nodes join with", "its token file")
	cmd.AddCommand(t.createCommand(), t.listCommand(), t.deleteCommand(), newTokenGenerateCommand(), t.rotateCommand())
	return cmd
}

func (t *serverTarget) createCommand() *cobra.Command {
	bt := bootstraptokenv1.BootstrapToken{
		TTL:    &metav1.Duration{Duration: 24 * time.Hour},
		Usages: []string{"signing", "authentication"},
		Groups: []string{nodejoin.JoinGroup},
	}
	create := &cobra.Command{
		Use:   "create [TOKEN]",
		Short: "Create a bootstrap token that joins agents, and print it whole",
		Long: `Create a bootstrap token (a Secret in kube-system, as kubeadm's) that joins agents to
the cluster, but not servers, until it expires. TOKEN, <id>.<secret> as generate prints
it, is made up if not given. The token printed is the whole one, K10<CA hash>::<id>.<secret>,
for kubeboot agent --token.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			server, err := t.serverToken()
			if err != nil {
				return err
			}
			token := ""
			if len(args) == 1 {
				token = args[0]
			} else if token, err = bootstraputil.GenerateBootstrapToken(); err != nil {
				return err
			}
			if bt.Token, err = bootstraptokenv1.NewBootstrapTokenString(token); err != nil {
				return fmt.Errorf("TOKEN: %w", err)
			}
			switch {
			case bt.TTL.Duration < 0:
				return fmt.Errorf("--ttl %s is negative (0: the token never expires)", bt.TTL.Duration)
			case bt.TTL.Duration == 0:
				bt.TTL = nil
			}
			if err := bootstraputil.ValidateUsages(bt.Usages); err != nil {
				return fmt.Errorf("--usages: %w", err)
			}
			for _, g := range bt.Groups {
				if err := bootstraputil.ValidateBootstrapGroupName(g); err != nil {
					return fmt.Errorf("--groups: %w", err)
				}
			}
			c, err := t.client()
			if err != nil {
				return err
			}
			if _, err := c.CoreV1().Secrets(metav1.NamespaceSystem).Create(cmd.Context(), bootstraptokenv1.BootstrapTokenToSecret(&bt), metav1.CreateOptions{}); err != nil {
				if apierrors.IsAlreadyExists(err) {
					return fmt.Errorf("a bootstrap token with ID %s exists", bt.Token.ID)
				}
				return fmt.Errorf("creating the bootstrap token: %w", err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), clusterjoin.Token{CAHash: server.CAHash, Password: bt.Token.String()})
			return nil
		},
	}
	create.Flags().DurationVar(&bt.TTL.Duration, "ttl", bt.TTL.Duration, "How long the token is valid; 0: it never expires.")
	create.Flags().StringVar(&bt.Description, "description", "", "What the token is for, as list shows it.")
	create.Flags().StringSliceVar(&bt.Usages, "usages", bt.Usages, "How the token may be used: "+strings.Join(bootstrapapi.KnownTokenUsages, ", ")+". Agents join with authentication.")
	create.Flags().StringSliceVar(&bt.Groups, "groups", bt.Groups, "The groups the token authenticates as, each system:bootstrappers:<name>.")

	return create
}

func (t *serverTarget) listCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the bootstrap tokens, kubelets' included",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := t.client()
			if err != nil {
				return err
			}
			secrets, err := c.CoreV1().Secrets(metav1.NamespaceSystem).List(cmd.Context(), metav1.ListOptions{
				FieldSelector: fields.OneTermEqualSelector("type", string(bootstrapapi.SecretTypeBootstrapToken)).String()})
			if err != nil {
				return fmt.Errorf("listing the bootstrap tokens: %w", err)
			}
			now := time.Now()
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 2, ' ', 0)
			fmt.Fprintln(w, "TOKEN\tTTL\tEXPIRES\tUSAGES\tDESCRIPTION\tEXTRA GROUPS")
			for i := range secrets.Items {
				bt, err := bootstraptokenv1.BootstrapTokenFromSecret(&secrets.Items[i])
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "Secret %s: %v\n", secrets.Items[i].Name, err)
					continue
				}
				ttl, expires := "<forever>", "<never>"
				if bt.Expires != nil {
					ttl, expires = duration.ShortHumanDuration(bt.Expires.Sub(now)), bt.Expires.UTC().Format(time.RFC3339)
					if bt.Expires.Time.Before(now) {
						ttl = "<expired>"
					}
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", bt.Token, ttl, expires, strings.Join(bt.Usages, ","),
					orNone(bt.Description), orNone(strings.Join(bt.Groups, ",")))
			}
			return w.Flush()
		},
	}

}

func (t *serverTarget) deleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "delete TOKEN...",
		Short: "Delete bootstrap tokens, by ID or whole",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := t.client()
			if err != nil {
				return err
			}
			for _, arg := range args {
				id := arg
				if _, creds, ok := strings.Cut(arg, "::"); ok {
					id = creds
				}
				id, _, _ = strings.Cut(id, ".")
				if !bootstraputil.IsValidBootstrapTokenID(id) {
					return fmt.Errorf("%q is not a bootstrap token or its ID ([a-z0-9]{6})", arg)
				}
				err := c.CoreV1().Secrets(metav1.NamespaceSystem).Delete(cmd.Context(), bootstraputil.BootstrapTokenSecretName(id), metav1.DeleteOptions{})
				if apierrors.IsNotFound(err) {
					return fmt.Errorf("no bootstrap token has ID %s", id)
				} else if err != nil {
					return fmt.Errorf("deleting bootstrap token %s: %w", id, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "bootstrap token %s deleted\n", id)
			}
			return nil
		},
	}

}

func newTokenGenerateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "generate",
		Short: "Print a random bootstrap token, <id>.<secret>, without creating it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token, err := bootstraputil.GenerateBootstrapToken()
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), token)
			return nil
		},
	}

}

func (t *serverTarget) rotateCommand() *cobra.Command {
	var oldToken, newToken string
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Replace the server token on every server of the cluster",
		Long: `Replace the server token (token in each server's --data-dir) with one of password
--new-token, on a running server. The cluster's record of its tokens (Secret
kube-system/kubeboot-join-tokens) changes first; every server writes the new token
into its data dir within moments, and joins with the old one are refused. Servers and
agents that joined keep working: they join once. With --token, the rotation happens
only if it is the current token.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if newToken == "" {
				return errors.New("--new-token is required: the new token's password (at least 16 characters), or a whole server token")
			}
			c, err := t.client()
			if err != nil {
				return err
			}
			tokenFile := controlplane.TokenFileIn(t.dataDir)
			current, err := t.serverToken()
			if err != nil {
				return err
			}
			next, err := clusterjoin.Record{Client: c, TokenFile: tokenFile}.Rotate(cmd.Context(), strings.TrimSpace(oldToken), newToken)
			if err != nil {
				return err
			}
			// The token seals the cluster's encryption configuration
			// (--secrets-encryption); were this to fail, each server
			// reseals it as it takes the new token.
			if err := secretsencryption.Reseal(cmd.Context(), c, current.Password, next.Password); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "resealing the cluster's encryption configuration with the new token: %v; the servers reseal it as they take the new token\n", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "the server token is rotated; servers join with\n%s\n", next)
			return nil
		},
	}
	rotate.Flags().StringVar(&oldToken, "token", "", "The current server token (whole, or its password): the rotation happens only if it is.")
	rotate.Flags().StringVar(&newToken, "new-token", "", "The new token: a password of at least 16 characters, or a whole server token K10<CA hash>::server:<password>.")

	return rotate
}

// orNone is s, or <none> for an empty column.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
