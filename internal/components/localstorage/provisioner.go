package localstorage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// selectedNodeAnnotation is where the scheduler puts the node a
// WaitForFirstConsumer claim's Pod lands on.
const selectedNodeAnnotation = "volume.kubernetes.io/selected-node"

// provisioner makes and removes the volumes of the nodes it serves: the
// library's controller hands it the claims of the local-path class.
type provisioner struct {
	client kubernetes.Interface
	// serves says whether the provisioner makes volumes on node.
	serves func(node string) bool
	// root holds the volumes' directories, one per volume.
	root string
	// makeDirs is false for nodes without a disk (simulated nodes): their
	// volumes are the PersistentVolume objects alone.
	makeDirs bool
}

var (
	_ controller.Provisioner   = (*provisioner)(nil)
	_ controller.Qualifier     = (*provisioner)(nil)
	_ controller.DeletionGuard = (*provisioner)(nil)
)

// ShouldProvision takes only the claims placed on a node it serves, so
// that another node's provisioner makes theirs without events from this
// one.
func (p *provisioner) ShouldProvision(_ context.Context, claim *corev1.PersistentVolumeClaim) bool {
	return p.serves(claim.Annotations[selectedNodeAnnotation])
}

// ShouldDelete takes only the volumes of the nodes it serves.
func (p *provisioner) ShouldDelete(_ context.Context, pv *corev1.PersistentVolume) bool {
	return p.serves(pv.Annotations[NodeAnnotation])
}

// Provision makes the claim's directory on the node its Pod landed on and
// returns the local PersistentVolume for it, bound to that node. A node
// without room for the claim's request sends the claim back to the
// scheduler, with a ProvisioningFailed event saying so.
func (p *provisioner) Provision(ctx context.Context, opts controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	node, claim := opts.SelectedNodeName, opts.PVC
	if node == "" {
		return nil, controller.ProvisioningFinished, fmt.Errorf("StorageClass %s needs volumeBindingMode %s: a local volume is made on the node its Pod lands on",
			opts.StorageClass.Name, "WaitForFirstConsumer")
	}
	if !p.serves(node) {
		return nil, controller.ProvisioningFinished, &controller.IgnoredError{Reason: "node " + node + " is another provisioner's"}
	}
	for _, mode := range claim.Spec.AccessModes {
		if mode != corev1.ReadWriteOnce && mode != corev1.ReadWriteOncePod {
			return nil, controller.ProvisioningFinished, fmt.Errorf("access mode %s: a local volume is one node's, so only %s and %s",
				mode, corev1.ReadWriteOnce, corev1.ReadWriteOncePod)
		}
	}
	size := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	path := filepath.Join(p.root, fmt.Sprintf("%s_%s_%s", opts.PVName, claim.Namespace, claim.Name))
	if p.makeDirs {
		if state, err := p.makeDir(node, path, size); err != nil {
			return nil, state, err
		}
	}
	hostname, err := p.hostname(ctx, node)
	if err != nil {
		return nil, controller.ProvisioningNoChange, err
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if opts.StorageClass.ReclaimPolicy != nil {
		reclaim = *opts.StorageClass.ReclaimPolicy
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: opts.PVName, Annotations: map[string]string{NodeAnnotation: node}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   claim.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			MountOptions:                  opts.StorageClass.MountOptions,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{hostname}}},
			}}}},
		},
	}, controller.ProvisioningFinished, nil
}

// makeDir makes the volume's directory, writable by any container user
// as local-path-provisioner's are, once it knows the node has room for
// size. An existing directory is the same claim's, retried.
func (p *provisioner) makeDir(node, path string, size resource.Quantity) (controller.ProvisioningState, error) {
	if err := os.MkdirAll(p.root, 0o700); err != nil {
		return controller.ProvisioningFinished, fmt.Errorf("node %s: %w", node, err)
	}
	free, err := available(p.root)
	if err != nil {
		return controller.ProvisioningFinished, fmt.Errorf("node %s: free space under %s: %w", node, p.root, err)
	}
	if free < size.Value() {
		return controller.ProvisioningReschedule, fmt.Errorf("node %s has no room for the claim: %s free under %s, the claim asks for %s",
			node, resource.NewQuantity(free, resource.BinarySI), p.root, &size)
	}
	if err := os.Mkdir(path, 0o777); err != nil && !errors.Is(err, os.ErrExist) {
		return controller.ProvisioningFinished, fmt.Errorf("node %s: %w", node, err)
	}
	// Mkdir's mode passes through the umask.
	if err := os.Chmod(path, 0o777); err != nil {
		return controller.ProvisioningFinished, fmt.Errorf("node %s: %w", node, err)
	}
	return controller.ProvisioningFinished, nil
}

// hostname is node's kubernetes.io/hostname label, which the volume's
// node affinity selects, as the scheduler and kubelet match it.
func (p *provisioner) hostname(ctx context.Context, node string) (string, error) {
	n, err := p.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return node, nil
	} else if err != nil {
		return "", fmt.Errorf("node %s: %w", node, err)
	}
	if h := n.Labels[corev1.LabelHostname]; h != "" {
		return h, nil
	}
	return node, nil
}

// Delete removes the volume's directory. Only a directory of root's own is
// removed: a PersistentVolume names its path, and whoever may edit it
// must not make a node remove something else.
func (p *provisioner) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	node := pv.Annotations[NodeAnnotation]
	if !p.serves(node) {
		return &controller.IgnoredError{Reason: "node " + node + " is another provisioner's"}
	}
	if !p.makeDirs {
		return nil
	}
	if pv.Spec.Local == nil {
		return fmt.Errorf("PersistentVolume %s is not a local volume", pv.Name)
	}
	path := filepath.Clean(pv.Spec.Local.Path)
	if filepath.Dir(path) != filepath.Clean(p.root) || slices.Contains([]string{".", ".."}, filepath.Base(path)) {
		return fmt.Errorf("PersistentVolume %s: path %s is not a volume under node %s's %s; not removed", pv.Name, path, node, p.root)
	}
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("node %s: %w", node, err)
	}
	return nil
}
