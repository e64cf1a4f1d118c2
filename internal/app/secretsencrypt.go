package app

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/apiserver/etcdstore"
	"github.com/kubeboot/kubeboot/internal/platform/etcd"
	"github.com/kubeboot/kubeboot/internal/platform/secretsencryption"
)

// newSecretsEncryptCommand is k3s's `secrets-encrypt` for a cluster whose
// servers run with --secrets-encryption: status, the stages of a key
// rotation (prepare, rotate, reencrypt), enable and disable, and
// rotate-keys, which runs the three stages at once. Each stage changes
// the configuration of every running server, which reloads it.
func newSecretsEncryptCommand() *cobra.Command {
	cmd, t := serverGroup("secrets-encrypt", "Show and change the encryption of Secrets at rest (--secrets-encryption)",
		"its embedded etcd (the Secrets are rewritten there), its server token (which seals the cluster's configuration)")
	e := &encryptTarget{serverTarget: t, prefix: etcdstore.DefaultPrefix, wait: time.Minute}
	cmd.PersistentFlags().StringVar(&e.prefix, "etcd-prefix", e.prefix, "The server's --etcd-prefix.")
	cmd.PersistentFlags().DurationVar(&e.wait, "timeout", e.wait, "How long a stage waits for every running server to load it.")
	cmd.AddCommand(e.statusCommand(),
		e.stageCommand("prepare", "Add a new key, which only reads, on every server",
			func(ctx context.Context, c secretsencryption.Cluster, force bool) (secretsencryption.Changed, error) {
				return c.Prepare(ctx, force, time.Now())
			}),
		e.stageCommand("rotate", "Make the prepared key the one that writes, on every server",
			func(ctx context.Context, c secretsencryption.Cluster, force bool) (secretsencryption.Changed, error) {
				return c.Rotate(ctx, force)
			}),
		e.stageCommand("enable", "Write Secrets encrypted again (then: reencrypt)",
			func(ctx context.Context, c secretsencryption.Cluster, force bool) (secretsencryption.Changed, error) {
				return c.Enable(ctx, force, time.Now())
			}),
		e.stageCommand("disable", "Write Secrets unencrypted, still reading encrypted ones (then: reencrypt)",
			func(ctx context.Context, c secretsencryption.Cluster, force bool) (secretsencryption.Changed, error) {
				return c.Disable(ctx, force)
			}),
		e.reencryptCommand(), e.rotateKeysCommand())
	return cmd
}

// encryptTarget is the cluster secrets-encrypt works on.
type encryptTarget struct {
	*serverTarget
	prefix string
	wait   time.Duration
}

// run is a RunE that runs do with the cluster, through the data dir's
// server and its etcd.
func (e *encryptTarget) run(do func(cmd *cobra.Command, c secretsencryption.Cluster) error) func(*cobra.Command, []string) error {
	return withEtcd(&e.dataDir, func(cmd *cobra.Command, _ []string, etcdClient *clientv3.Client) error {
		if e.wait <= 0 {
			return fmt.Errorf("--timeout %s must be positive", e.wait)
		}
		client, err := e.client()
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		return do(cmd, secretsencryption.Cluster{Client: client, Etcd: etcdClient, Prefix: e.prefix,
			Path: secretsencryption.ConfigPath(e.dataDir), TokenFile: controlplane.TokenFileIn(e.dataDir), Wait: e.wait,
			Progress: func(done, total int) { fmt.Fprintf(out, "re-encrypted %d of %d Secrets\n", done, total) }})
	})
}

func (e *encryptTarget) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the keys, the stage, each server's, and how many Secrets each key stored",
		Args:  cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, c secretsencryption.Cluster) error {
			st, err := c.ReadStatus(cmd.Context())
			if err != nil {
				return err
			}
			printStatus(cmd.OutOrStdout(), st)
			return nil
		}),
	}
}

// printStatus prints st as k3s's secrets-encrypt status, with each
// server's stage and the Secrets' keys after.
func printStatus(out io.Writer, st secretsencryption.Status) {
	enabled := "Enabled"
	if !st.Config.Enabled() {
		enabled = "Disabled"
	}
	fmt.Fprintf(out, "Encryption Status: %s\n", enabled)
	fmt.Fprintf(out, "Current Rotation Stage: %s\n", st.Stage)
	switch {
	case st.NoRecord:
		fmt.Fprintln(out, "Server Encryption Hashes: no record yet (the servers make it once ready); this server's file is shown")
	case len(st.Behind) == 0:
		fmt.Fprintln(out, "Server Encryption Hashes: All hashes match")
	default:
		fmt.Fprintf(out, "Server Encryption Hashes: hash does not match at server(s) %s\n", strings.Join(st.Behind, ", "))
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "Active\tKey Type\tName")
	fmt.Fprintln(w, "------\t--------\t----")
	for i, k := range st.Config {
		active := ""
		if i == 0 {
			active = " *"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", active, k.TypeName(), k)
	}
	w.Flush()
	if !st.NoRecord {
		fmt.Fprintln(out)
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "Server\tStage\tLoaded\tProvider")
		for _, name := range st.Up {
			s := st.Servers[name]
			loaded := "yes"
			if slices.Contains(st.Behind, name) {
				loaded = "no"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", name, s.Stage, loaded, s.Provider)
		}
		for _, name := range st.Down {
			s := st.Servers[name]
			fmt.Fprintf(w, "%s\t%s\tdown: takes it at its start\t%s\n", name, s.Stage, s.Provider)
		}
		w.Flush()
	}
	fmt.Fprintln(out)
	keys := make([]string, 0, len(st.Secrets))
	for k := range st.Secrets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(out, "Secrets stored with %s: %d\n", k, st.Secrets[k])
	}
}

// stageCommand is a command running one stage, with --force.
func (e *encryptTarget) stageCommand(use, short string, stage func(context.Context, secretsencryption.Cluster, bool) (secretsencryption.Changed, error)) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `.

Every running server loads the change within seconds, without a restart; the command
waits until each has. A server that is down takes it at its next start. The stage must
follow the one the cluster is at, with every running server on it, unless --force.`,
		Args: cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, c secretsencryption.Cluster) error {
			changed, err := stage(cmd.Context(), c, force)
			if err != nil {
				return err
			}
			printChanged(cmd.OutOrStdout(), use, changed)
			return nil
		}),
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "Run the stage whatever stage the cluster is at, and whether or not every running server has loaded it.")
	return cmd
}

// printChanged says what a stage did.
func printChanged(out io.Writer, command string, changed secretsencryption.Changed) {
	fmt.Fprintf(out, "%s: every running server has loaded it; the cluster is at the stage %s\n", command, changed.Stage)
	if len(changed.Down) > 0 {
		fmt.Fprintf(out, "down, taking it at their start: %s\n", strings.Join(changed.Down, ", "))
	}
	if changed.Stage == secretsencryption.StageReencryptRequest {
		fmt.Fprintln(out, "next: kubeboot secrets-encrypt reencrypt, to rewrite the Secrets stored before")
	}
}

func (e *encryptTarget) reencryptCommand() *cobra.Command {
	var force, skip bool
	cmd := &cobra.Command{
		Use:   "reencrypt",
		Short: "Rewrite every Secret with the key that writes, then drop the other keys",
		Long: `Rewrite every Secret in etcd with the key that writes (a Secret written meanwhile is
read again), then drop every other key but identity on every server, unless --skip.
Follows rotate, enable or disable; a reencrypt that stopped half way is run again.`,
		Args: cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, c secretsencryption.Cluster) error {
			done, err := c.Reencrypt(cmd.Context(), force, skip)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "re-encrypted %d Secrets in %s\n", done.Secrets, done.Took.Round(time.Millisecond))
			printChanged(cmd.OutOrStdout(), "reencrypt", done.Changed)
			return nil
		}),
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "Run whatever stage the cluster is at, and whether or not every running server has loaded it.")
	cmd.Flags().BoolVarP(&skip, "skip", "s", false, "Keep the keys that no longer write.")
	return cmd
}

func (e *encryptTarget) rotateKeysCommand() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "rotate-keys",
		Short: "Rotate the key: prepare, rotate and reencrypt at once, on every server",
		Long: `Rotate the key of a cluster whose servers run with --secrets-encryption, while they
run: a new key of the servers' --secrets-encryption-provider is added (prepare), made the
one that writes (rotate), every Secret is re-encrypted with it and the old keys are
dropped (reencrypt). Each stage waits until every running server has loaded it, so that
no server reads a Secret stored with a key it lacks; progress is reported every 1,000
Secrets.`,
		Args: cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, c secretsencryption.Cluster) error {
			start := time.Now()
			done, err := c.RotateKeys(cmd.Context(), force, start)
			if err != nil {
				return err
			}
			took := done.Took.Seconds()
			fmt.Fprintf(cmd.OutOrStdout(), "re-encrypted %d Secrets in %s (%.0f/s); rotated to key %s in %s\n", done.Secrets,
				done.Took.Round(time.Millisecond), float64(done.Secrets)/max(took, 1e-9), done.Writer, time.Since(start).Round(time.Millisecond))
			printChanged(cmd.OutOrStdout(), "rotate-keys", done.Changed)
			return nil
		}),
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "Start whatever stage the cluster is at, and whether or not every running server has loaded it.")
	return cmd
}

// withEtcd is a command's RunE that runs run with a client of the
// embedded etcd of the running server on *dataDir, closed after.
func withEtcd(dataDir *string, run func(cmd *cobra.Command, args []string, etcd *clientv3.Client) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := etcd.Dial(controlplane.EtcdDirIn(*dataDir))
		if err != nil {
			return fmt.Errorf("--data-dir %s: the server's etcd: %w", *dataDir, err)
		}
		defer c.Close()
		return run(cmd, args, c)
	}
}
