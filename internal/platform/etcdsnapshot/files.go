package etcdsnapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// The ETCDSnapshotFile objects (k3s.cattle.io/v1, k3s's kind and labels)
// that mirror the snapshots: one for each snapshot in a server's snapshot
// directory, labelled with its node, and one for each in the --etcd-s3
// bucket, labelled s3.
var FileResource = schema.GroupVersionResource{Group: "k3s.cattle.io", Version: "v1", Resource: "etcdsnapshotfiles"}

const (
	fileKind = "ETCDSnapshotFile"
	// StorageNodeLabel tells where an object's snapshot is: a node's
	// snapshot directory (the node's name) or the bucket (S3Storage).
	StorageNodeLabel = "etcd.k3s.cattle.io/snapshot-storage-node"
	// S3Storage is StorageNodeLabel's value, and the node's name, of the
	// bucket's snapshots, as k3s has them.
	S3Storage = "s3"
)

// Files keeps the ETCDSnapshotFile objects of a node's snapshots.
type Files struct {
	// Client reaches the cluster.
	Client dynamic.Interface
	// Node is the node whose snapshot directory Sync is given.
	Node string
	// S3 is the bucket's service, recorded in its snapshots' objects
	// (never its keys).
	S3 S3Options
}

// Sync makes the objects labelled with the node match local, the
// snapshots of its directory, and, unless remote is nil, those labelled
// s3 match remote, the bucket's. Without the kind (a server without the
// component that installs it) there is nothing to keep.
func (f Files) Sync(ctx context.Context, local, remote []Snapshot) error {
	err := f.sync(ctx, f.Node, local)
	if apierrors.IsNotFound(err) {
		return nil
	}
	errs := []error{err}
	if remote != nil {
		errs = append(errs, f.sync(ctx, S3Storage, remote))
	}
	return errors.Join(errs...)
}

func (f Files) sync(ctx context.Context, storage string, snaps []Snapshot) error {
	files := f.Client.Resource(FileResource)
	have, err := files.List(ctx, metav1.ListOptions{LabelSelector: StorageNodeLabel + "=" + storage})
	if err != nil {
		return err
	}
	want := map[string]*unstructured.Unstructured{}
	for _, s := range snaps {
		obj := f.object(storage, s)
		want[obj.GetName()] = obj
	}
	var errs []error
	for _, o := range have.Items {
		if _, ok := want[o.GetName()]; ok {
			delete(want, o.GetName())
			continue
		}
		if err := files.Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting ETCDSnapshotFile %s: %w", o.GetName(), err))
		}
	}
	for _, obj := range want {
		status := obj.Object["status"]
		created, err := files.Create(ctx, obj, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue // another server's, of the same bucket
		} else if err != nil {
			errs = append(errs, fmt.Errorf("creating ETCDSnapshotFile %s: %w", obj.GetName(), err))
			continue
		}
		created.Object["status"] = status
		if _, err := files.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("ETCDSnapshotFile %s's status: %w", obj.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// object is the ETCDSnapshotFile of snapshot s, where storage says.
func (f Files) object(storage string, s Snapshot) *unstructured.Unstructured {
	spec := map[string]any{"snapshotName": s.Name, "nodeName": f.Node, "location": "file://" + s.Path}
	prefix := "local"
	if storage == S3Storage {
		prefix = S3Storage
		spec["nodeName"], spec["location"] = S3Storage, s.Path
		spec["s3"] = map[string]any{"endpoint": f.S3.Endpoint, "endpointCA": f.S3.EndpointCA, "skipSSLVerify": f.S3.SkipSSLVerify,
			"bucket": f.S3.Bucket, "region": f.S3.Region, "prefix": f.S3.Folder, "insecure": f.S3.Insecure}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"spec": spec,
		"status": map[string]any{
			"size":         resource.NewQuantity(s.Size, resource.BinarySI).String(),
			"creationTime": s.Created.UTC().Format(time.RFC3339),
			"readyToUse":   true,
		},
	}}
	obj.SetAPIVersion(FileResource.GroupVersion().String())
	obj.SetKind(fileKind)
	obj.SetName(fileName(prefix, s.Name, spec["location"].(string)))
	obj.SetLabels(map[string]string{StorageNodeLabel: storage})
	return obj
}

// fileName is an object's name: where its snapshot is, the snapshot's
// name made a DNS subdomain, and a hash of its location, which tells apart
// two whose names the cleaning made alike.
func fileName(prefix, name, location string) string {
	sum := sha256.Sum256([]byte(location))
	clean := strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '-' // what a DNS subdomain does not take
	}, strings.ToLower(name)), "-.")
	if room := 253 - len(prefix) - 8; len(clean) > room {
		clean = clean[:room]
	}
	return prefix + "-" + clean + "-" + hex.EncodeToString(sum[:3])
}
