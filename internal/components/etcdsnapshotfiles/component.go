// Package etcdsnapshotfiles keeps k3s's ETCDSnapshotFile objects
// (k3s.cattle.io/v1) for the snapshots of a server's embedded etcd: it
// installs the kind, and on each server records the snapshots of its
// snapshot directory and of the --etcd-s3 bucket, at start, after each
// scheduled snapshot and every --etcd-snapshot-reconcile-interval (which
// catches what `kubeboot etcd-snapshot` changed).
package etcdsnapshotfiles

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/apiserver/crdinstall"
	"github.com/kubeboot/kubeboot/internal/platform/etcdsnapshot"
)

// Name is the component's.
const Name = "etcd-snapshot-files"

// User is the user the component acts as.
const User = "system:kubeboot:etcd-snapshot-files"

// crdsFile names the embedded CustomResourceDefinition in errors.
const crdsFile = "etcdsnapshotfiles/crds/etcdsnapshotfiles.yaml"

//go:embed crds/etcdsnapshotfiles.yaml
var crdsYAML []byte

// Component keeps the ETCDSnapshotFile objects of the server's snapshots.
type Component struct {
	crds []crdinstall.CRD
}

// New returns the component.
func New() *Component { return &Component{} }

// Name implements controlplane.Component.
func (*Component) Name() string { return Name }

// Complete implements controlplane.Component.
func (c *Component) Complete(controlplane.Settings) (controlplane.Needs, error) {
	crds, err := crdinstall.Parse(crdsFile, crdsYAML)
	if err != nil {
		return controlplane.Needs{}, err
	}
	c.crds = crds
	return controlplane.Needs{
		User: User,
		Grant: controlplane.GrantClusterRole(User, User,
			rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
				Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
			rbacv1.PolicyRule{APIGroups: []string{etcdsnapshot.FileResource.Group}, Resources: []string{etcdsnapshot.FileResource.Resource, etcdsnapshot.FileResource.Resource + "/status"},
				Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}),
		Allowed: authorizationv1.ResourceAttributes{Verb: "create", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
	}, nil
}

// Run implements controlplane.Component: on a server that keeps
// snapshots it installs the kind, then records the snapshots now and
// after each scheduled one, until ctx is done.
func (c *Component) Run(ctx context.Context, s *controlplane.Server) error {
	if !s.TakesSnapshots() {
		return nil
	}
	logger := klog.FromContext(ctx).WithName(Name)
	config, err := s.ClientConfig(User)
	if err != nil {
		return err
	}
	if err := crdinstall.InstallWith(ctx, config, c.crds); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("the ETCDSnapshotFile kind: %w", err)
	}
	client, err := dynamic.NewForConfig(config)
	if err != nil {
		return err
	}
	tick := time.NewTicker(s.SnapshotReconcileInterval())
	defer tick.Stop()
	for {
		files, local, remote, err := s.SnapshotFiles(ctx, client)
		switch {
		case err != nil && local == nil:
			logger.Error(err, "Listing the etcd snapshots")
		case err != nil:
			// The directory's are recorded while the bucket cannot be
			// listed; the bucket's records are kept.
			logger.Error(err, "Listing the etcd snapshots in the bucket")
			fallthrough
		default:
			if err := files.Sync(ctx, local, remote); err != nil {
				logger.Error(err, "Recording the etcd snapshots as ETCDSnapshotFiles")
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.SnapshotsChanged():
		case <-tick.C:
		}
	}
}
