package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/etcdsnapshot"
)

// newEtcdCommand shows and changes the membership of a running server's
// embedded etcd, through its socket in the data dir.
func newEtcdCommand() *cobra.Command {
	dataDir := controlplane.DefaultDataDir()
	cmd := dataDirGroup("etcd", "The embedded etcd of a running server (--cluster-init, --server)",
		"The data directory of the running server, on embedded etcd.", &dataDir)
	member := groupCommand("member", "List and remove the members of the cluster's etcd")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the members: ID, name, peer URL, and whether each votes or is a learner",
		Args:  cobra.NoArgs,
		RunE: withEtcd(&dataDir, func(cmd *cobra.Command, _ []string, etcd *clientv3.Client) error {
			resp, err := etcd.MemberList(cmd.Context())
			if err != nil {
				return fmt.Errorf("--data-dir %s: listing etcd members (is the server running?): %w", dataDir, err)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tPEER URLS\tROLE")
			for _, m := range resp.Members {
				role := "voter"
				if m.IsLearner {
					role = "learner"
				}
				fmt.Fprintf(w, "%x\t%s\t%v\t%s\n", m.ID, m.Name, m.PeerURLs, role)
			}
			return w.Flush()
		}),
	}
	remove := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a member (a server deleted for good), by its hex ID from list",
		Args:  cobra.ExactArgs(1),
		RunE: withEtcd(&dataDir, func(cmd *cobra.Command, args []string, etcd *clientv3.Client) error {
			id, err := strconv.ParseUint(args[0], 16, 64)
			if err != nil {
				return fmt.Errorf("%q is not a member ID (hex, as list shows it)", args[0])
			}
			if _, err := etcd.MemberRemove(cmd.Context(), id); err != nil {
				return fmt.Errorf("removing etcd member %x: %w", id, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed etcd member %x\n", id)
			return nil
		}),
	}
	member.AddCommand(list, remove)
	cmd.AddCommand(member)
	return cmd
}

// newEtcdSnapshotCommand is k3s's etcd-snapshot: save a snapshot of a
// running server's embedded etcd, list, delete and prune them, in the
// snapshot directory and, with --etcd-s3, in an S3 bucket.
func newEtcdSnapshotCommand() *cobra.Command {
	t := &snapshotTarget{dataDir: controlplane.DefaultDataDir(), s3: etcdsnapshot.NewS3Options()}
	cmd := dataDirGroup("etcd-snapshot", "Save, list, delete and prune snapshots of the embedded etcd",
		"The data directory of the server, on embedded etcd.", &t.dataDir)
	cmd.Long = `Save, list, delete and prune snapshots of a server's embedded etcd, in the snapshot
directory and, with --etcd-s3, in an S3 bucket too. Restore one with kubeboot server
--cluster-reset --cluster-reset-restore-path=FILE (or, with --etcd-s3, the name of one
in the bucket).`
	cmd.PersistentFlags().StringVar(&t.dir, "etcd-snapshot-dir", t.dir, "Where the snapshots are. Default: snapshots in --data-dir.")
	t.s3.AddFlags(cmd.PersistentFlags())
	cmd.AddCommand(t.saveCommand(), t.listCommand(), t.deleteCommand(), t.pruneCommand())
	return cmd
}

// snapshotTarget is where the etcd-snapshot commands work: a server's data
// dir, its snapshot directory and, with --etcd-s3, a bucket.
type snapshotTarget struct {
	dataDir, dir string
	s3           etcdsnapshot.S3Options
}

// snapshotDir is --etcd-snapshot-dir, or the data dir's.
func (t *snapshotTarget) snapshotDir() string {
	if t.dir != "" {
		return t.dir
	}
	return etcdsnapshot.Dir(t.dataDir)
}

// store is the bucket's store with --etcd-s3, else nil.
func (t *snapshotTarget) store(cmd *cobra.Command) (*etcdsnapshot.S3, error) {
	t.s3.Complete()
	if !t.s3.Enabled {
		return nil, nil
	}
	if err := t.s3.Validate(); err != nil {
		return nil, err
	}
	opts := t.s3
	if opts.ConfigSecret != "" {
		admin, err := clientcmd.BuildConfigFromFlags("", filepath.Join(t.dataDir, "admin.kubeconfig"))
		if err != nil {
			return nil, fmt.Errorf("--etcd-s3-config-secret %s: %w", opts.ConfigSecret, err)
		}
		client, err := kubernetes.NewForConfig(admin)
		if err != nil {
			return nil, err
		}
		if opts, err = opts.Resolve(cmd.Context(), client); err != nil {
			return nil, err
		}
	}
	return etcdsnapshot.NewS3(cmd.Context(), opts)
}

func (t *snapshotTarget) saveCommand() *cobra.Command {
	name := etcdsnapshot.OnDemandName
	var compress bool
	save := &cobra.Command{
		Use:   "save",
		Short: "Save a snapshot of the running server's etcd; the last line printed is its path",
		Args:  cobra.NoArgs,
		RunE: withEtcd(&t.dataDir, func(cmd *cobra.Command, _ []string, etcd *clientv3.Client) error {
			node, err := os.Hostname()
			if err != nil {
				return err
			}
			snap, err := etcdsnapshot.Save(cmd.Context(), etcd, t.snapshotDir(), name, node, time.Now())
			if err == nil && compress {
				snap, err = etcdsnapshot.Compress(snap)
			}
			if err != nil {
				return fmt.Errorf("--data-dir %s: saving a snapshot (is the server running?): %w", t.dataDir, err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "saved %d bytes\n", snap.Size)
			// A snapshot that does not reach the bucket is kept, and
			// the command fails saying why.
			store, err := t.store(cmd)
			if err == nil && store != nil {
				err = store.Upload(cmd.Context(), snap)
			}
			if err != nil {
				fmt.Fprintln(out, snap.Path)
				return fmt.Errorf("the snapshot is kept in %s only: %w", t.snapshotDir(), err)
			}
			if store != nil {
				fmt.Fprintf(out, "uploaded to %s\n", store.Location(snap.Name))
			}
			fmt.Fprintln(out, snap.Path)
			return nil
		}),
	}
	save.Flags().StringVar(&name, "name", name, "The snapshot's name, before -<node>-<unix time>.")
	save.Flags().BoolVar(&compress, "etcd-snapshot-compress", false, "Keep (and upload) the snapshot as a zip archive, <name>.zip.")
	return save
}

func (t *snapshotTarget) listCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the snapshots, oldest first: the directory's, then the bucket's",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			snaps, err := etcdsnapshot.List(t.snapshotDir())
			if err != nil {
				return err
			}
			store, err := t.store(cmd)
			if err != nil {
				return err
			}
			if store != nil {
				remote, err := store.List(cmd.Context())
				if err != nil {
					return err
				}
				snaps = append(snaps, remote...)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tSIZE\tCREATED\tLOCATION")
			for _, s := range snaps {
				fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", s.Name, s.Size, s.Created.UTC().Format(time.RFC3339), s.Path)
			}
			return w.Flush()
		},
	}
}

func (t *snapshotTarget) deleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete snapshots by name, in the directory and, with --etcd-s3, the bucket",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := t.store(cmd)
			if err != nil {
				return err
			}
			if store == nil {
				return etcdsnapshot.Delete(t.snapshotDir(), args...)
			}
			for _, n := range args {
				if err := etcdsnapshot.Delete(t.snapshotDir(), n); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
			return store.Delete(cmd.Context(), args...)
		},
	}
}

func (t *snapshotTarget) pruneCommand() *cobra.Command {
	name := etcdsnapshot.OnDemandName
	retention := etcdsnapshot.DefaultRetention
	prune := &cobra.Command{
		Use:   "prune",
		Short: "Delete the oldest snapshots of --name until --etcd-snapshot-retention are left, in the directory and the bucket",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if retention < 1 {
				return fmt.Errorf("--etcd-snapshot-retention %d must be at least 1", retention)
			}
			store, err := t.store(cmd)
			if err != nil {
				return err
			}
			deleted, err := etcdsnapshot.Prune(t.snapshotDir(), name, retention)
			for _, s := range deleted {
				fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", s.Name)
			}
			if err != nil || store == nil {
				return err
			}
			deleted, err = store.Prune(cmd.Context(), name, retention)
			for _, s := range deleted {
				fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", s.Path)
			}
			return err
		},
	}
	prune.Flags().StringVar(&name, "name", name, "Prune the snapshots whose name begins with this (etcd-snapshot: the scheduled ones).")
	prune.Flags().IntVar(&retention, "etcd-snapshot-retention", retention, "How many to keep.")
	return prune
}
