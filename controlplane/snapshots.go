package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/platform/etcd"
	"github.com/kubeboot/kubeboot/internal/platform/etcdsnapshot"
)

// resetMarkerName is the file a reset leaves in the data dir, so that a
// start that still has --cluster-reset (a service unit not yet edited)
// does not reset again, undoing what was written since.
const resetMarkerName = "cluster-reset"

// completeSnapshots resolves and checks the snapshot and reset settings.
func (cc *completedConfig) completeSnapshots() error {
	if cc.EtcdSnapshotDir == "" {
		cc.EtcdSnapshotDir = etcdsnapshot.Dir(cc.DataDir)
	} else if abs, err := filepath.Abs(cc.EtcdSnapshotDir); err == nil {
		cc.EtcdSnapshotDir = abs
	}
	var errs []error
	if cc.EtcdSnapshotRetention < 1 {
		errs = append(errs, fmt.Errorf("--etcd-snapshot-retention %d must be at least 1", cc.EtcdSnapshotRetention))
	}
	if !cc.EtcdDisableSnapshots && cc.embeddedEtcd() {
		schedule, err := cron.ParseStandard(cc.EtcdSnapshotScheduleCron)
		if err != nil {
			errs = append(errs, fmt.Errorf("--etcd-snapshot-schedule-cron %q: %w", cc.EtcdSnapshotScheduleCron, err))
		}
		cc.snapshotSchedule = schedule
	}
	if cc.EtcdQuotaBackendBytes < 0 {
		errs = append(errs, fmt.Errorf("--etcd-quota-backend-bytes %d must not be negative", cc.EtcdQuotaBackendBytes))
	} else if cc.EtcdQuotaBackendBytes > 0 && !cc.embeddedEtcd() {
		errs = append(errs, errors.New("--etcd-quota-backend-bytes is for the embedded etcd; set --quota-backend-bytes on the members of --etcd-servers"))
	}
	if cc.EtcdSnapshotReconcileInterval <= 0 {
		errs = append(errs, fmt.Errorf("--etcd-snapshot-reconcile-interval %s must be positive", cc.EtcdSnapshotReconcileInterval))
	}
	if err := cc.EtcdS3.Validate(); err != nil {
		errs = append(errs, err)
	} else if cc.EtcdS3.Enabled && !cc.embeddedEtcd() {
		errs = append(errs, errors.New("--etcd-s3 is for the embedded etcd's snapshots"))
	}
	if path := cc.ClusterResetRestorePath; path != "" {
		_, statErr := os.Stat(path)
		switch {
		case !cc.ClusterReset:
			errs = append(errs, errors.New("--cluster-reset-restore-path needs --cluster-reset"))
		case errors.Is(statErr, os.ErrNotExist) && cc.EtcdS3.Enabled && !strings.Contains(path, "/"):
			// A snapshot's name in the bucket: fetched, then checked, by
			// ResetCluster.
			cc.restoreFromS3 = true
		default:
			if err := etcdsnapshot.Verify(path, cc.Progress); err != nil {
				errs = append(errs, fmt.Errorf("--cluster-reset-restore-path: %w", err))
			}
		}
	}
	if cc.ClusterReset {
		if !cc.embeddedEtcd() {
			errs = append(errs, errors.New("--cluster-reset is for the embedded etcd"))
		}
		if cc.JoinServer != "" {
			errs = append(errs, errors.New("--cluster-reset and --server exclude each other"))
		}
		if cc.ClusterResetRestorePath == "" && !etcd.HasData(cc.etcdDir()) {
			errs = append(errs, fmt.Errorf("--cluster-reset: --data-dir %s has no etcd data to reset (give --cluster-reset-restore-path to restore a snapshot)", cc.DataDir))
		}
		if t, err := os.ReadFile(filepath.Join(cc.DataDir, resetMarkerName)); err == nil {
			errs = append(errs, fmt.Errorf("--cluster-reset: --data-dir %s was reset already (%s); start without --cluster-reset", cc.DataDir, t))
		}
	}
	return errors.Join(errs...)
}

// ResetCluster does what --cluster-reset asks instead of serving: it
// restores --cluster-reset-restore-path's snapshot into the data dir's
// etcd, or makes its member a new cluster of one with its data (etcd's
// --force-new-cluster), and leaves a marker so that a start with the flag
// still set refuses to reset again. It returns what to tell the user.
func ResetCluster(ctx context.Context, c CompletedConfig) (string, error) {
	cfg := c.completedConfig
	if cfg == nil || !cfg.ClusterReset {
		return "", errors.New("controlplane: ResetCluster needs a config with ClusterReset")
	}
	if err := prepareDataDir(cfg.DataDir); err != nil {
		return "", err
	}
	ec := (&Server{cfg: cfg}).etcdConfig()
	var what string
	path := cfg.ClusterResetRestorePath
	if cfg.restoreFromS3 {
		store, err := etcdsnapshot.NewS3(ctx, cfg.EtcdS3)
		if err != nil {
			return "", fmt.Errorf("--cluster-reset-restore-path %s: %w", path, err)
		}
		if path, err = store.Download(ctx, path, cfg.EtcdSnapshotDir); err != nil {
			return "", fmt.Errorf("--cluster-reset-restore-path: %w", err)
		}
	}
	if path != "" {
		name, peerURL := ec.Member()
		aside, err := etcdsnapshot.Restore(path, ec.Dir, name, peerURL, time.Now(), cfg.Progress)
		if err != nil {
			return "", fmt.Errorf("--cluster-reset-restore-path: %w", err)
		}
		what = "restored " + path
		if aside != "" {
			what += "; the etcd data it replaced is in " + aside
		}
	} else {
		ec.ForceNewCluster = true
		member, err := etcd.Start(ctx, ec)
		if err != nil {
			return "", fmt.Errorf("--cluster-reset: %w", err)
		}
		if err := member.Close(); err != nil {
			return "", err
		}
		what = "the etcd member is a new cluster of one, with its data"
	}
	marker := time.Now().UTC().Format(time.RFC3339)
	if err := os.WriteFile(filepath.Join(cfg.DataDir, resetMarkerName), []byte(marker), 0o600); err != nil {
		return "", err
	}
	return fmt.Sprintf("Cluster reset: %s. Start the server again without --cluster-reset; other servers rejoin with a new data dir and --server.", what), nil
}

// clearResetMarker removes a reset's marker once the server starts
// without --cluster-reset.
func clearResetMarker(dataDir string) error {
	err := os.Remove(filepath.Join(dataDir, resetMarkerName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// takeSnapshots takes a snapshot of the embedded etcd at every time of the
// schedule and prunes the scheduled ones to the retention, until ctx ends.
func (s *Server) takeSnapshots(ctx context.Context) {
	schedule := s.cfg.snapshotSchedule
	if schedule == nil || s.etcd == nil {
		return
	}
	logger := klog.FromContext(ctx)
	node := s.snapshotNode()
	for {
		next := schedule.Next(time.Now())
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		snap, err := etcdsnapshot.Save(ctx, s.etcd.Client(), s.cfg.EtcdSnapshotDir, etcdsnapshot.ScheduledName, node, time.Now())
		if err == nil && s.cfg.EtcdSnapshotCompress {
			snap, err = etcdsnapshot.Compress(snap)
		}
		if err != nil {
			logger.Error(err, "Scheduled etcd snapshot failed", "dir", s.cfg.EtcdSnapshotDir)
			continue
		}
		logger.Info("Saved a scheduled etcd snapshot", "path", snap.Path, "bytes", snap.Size)
		if deleted, err := etcdsnapshot.Prune(s.cfg.EtcdSnapshotDir, etcdsnapshot.ScheduledName, s.cfg.EtcdSnapshotRetention); err != nil {
			logger.Error(err, "Pruning scheduled etcd snapshots failed", "dir", s.cfg.EtcdSnapshotDir)
		} else if len(deleted) > 0 {
			logger.V(2).Info("Pruned scheduled etcd snapshots", "deleted", len(deleted))
		}
		if s.cfg.EtcdS3.Enabled {
			if err := s.uploadSnapshot(ctx, snap, node); err != nil {
				logger.Error(err, "Uploading a scheduled etcd snapshot failed: it is kept in the snapshot directory", "path", snap.Path)
				s.api.Recorder().Eventf(s.eventTarget(), corev1.EventTypeWarning, ETCDSnapshotFailed,
					"The etcd snapshot %s is kept in %s only: %v", snap.Name, s.cfg.EtcdSnapshotDir, err)
			}
		}
		select {
		case s.snapshotsChanged <- struct{}{}:
		default: // one pending is enough
		}
	}
}

// snapshotNode is the node the server's snapshots are named for: its etcd
// member's name, or the host's.
func (s *Server) snapshotNode() string {
	if node := s.etcdConfig().Name; node != "" {
		return node
	}
	node, _ := os.Hostname()
	return node
}

// TakesSnapshots is whether the server keeps snapshots: of its embedded
// etcd.
func (s *Server) TakesSnapshots() bool { return s.cfg.embeddedEtcd() }

// SnapshotsChanged has a value each time a scheduled snapshot has changed
// the server's snapshots (taken, uploaded, pruned), for one reader.
func (s *Server) SnapshotsChanged() <-chan struct{} { return s.snapshotsChanged }

// SnapshotReconcileInterval is how often the snapshots' records are
// reconciled besides (--etcd-snapshot-reconcile-interval): the changes
// `kubeboot etcd-snapshot` makes.
func (s *Server) SnapshotReconcileInterval() time.Duration {
	return s.cfg.EtcdSnapshotReconcileInterval
}

// SnapshotFiles returns the server's snapshots, those of its snapshot
// directory and, with --etcd-s3, of the bucket, and their records
// (ETCDSnapshotFile objects) kept through client.
func (s *Server) SnapshotFiles(ctx context.Context, client dynamic.Interface) (files etcdsnapshot.Files, local, remote []etcdsnapshot.Snapshot, err error) {
	files = etcdsnapshot.Files{Client: client, Node: s.snapshotNode()}
	if local, err = etcdsnapshot.List(s.cfg.EtcdSnapshotDir); err != nil || !s.cfg.EtcdS3.Enabled {
		return files, local, nil, err
	}
	admin, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		return files, local, nil, err
	}
	if files.S3, err = s.cfg.EtcdS3.Resolve(ctx, admin); err != nil {
		return files, local, nil, err
	}
	store, err := etcdsnapshot.NewS3(ctx, files.S3)
	if err != nil {
		return files, local, nil, err
	}
	remote, err = store.List(ctx)
	return files, local, remote, err
}

// ETCDSnapshotFailed is the reason of the Events that tell of a
// scheduled snapshot that did not reach S3 (k3s's).
const ETCDSnapshotFailed = "ETCDSnapshotFailed"

// uploadSnapshot uploads a scheduled snapshot to S3 and prunes this
// node's there to the retention.
func (s *Server) uploadSnapshot(ctx context.Context, snap etcdsnapshot.Snapshot, node string) error {
	client, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		return err
	}
	opts, err := s.cfg.EtcdS3.Resolve(ctx, client)
	if err != nil {
		return err
	}
	store, err := etcdsnapshot.NewS3(ctx, opts)
	if err != nil {
		return err
	}
	if err := store.Upload(ctx, snap); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Uploaded a scheduled etcd snapshot", "location", store.Location(snap.Name))
	_, err = store.Prune(ctx, etcdsnapshot.ScheduledName+"-"+node, s.cfg.EtcdSnapshotRetention)
	return err
}
