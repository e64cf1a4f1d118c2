package localstorage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

func newClaim(size string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", Annotations: map[string]string{selectedNodeAnnotation: "node-a"}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: modes,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}},
	}
}

func newNodeProvisioner(t *testing.T) *provisioner {
	// The node's hostname label is not its name: the volume's affinity
	// must follow the label.
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{corev1.LabelHostname: "host-a"}}})
	return &provisioner{client: client, root: filepath.Join(t.TempDir(), "storage"), makeDirs: true, serves: func(n string) bool { return n == "node-a" }}
}

func TestProvision(t *testing.T) {
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: ClassName}, MountOptions: []string{"noatime"}}
	for _, tc := range []struct {
		name      string
		node      string
		claim     *corev1.PersistentVolumeClaim
		wantState controller.ProvisioningState
		wantErr   string // "" for a volume; "ignored" for IgnoredError
	}{
		{name: "a volume on the node", node: "node-a", claim: newClaim("1Mi", corev1.ReadWriteOnce), wantState: controller.ProvisioningFinished},
		{name: "ReadWriteOncePod", node: "node-a", claim: newClaim("1Mi", corev1.ReadWriteOncePod), wantState: controller.ProvisioningFinished},
		{name: "another node's claim", node: "node-b", claim: newClaim("1Mi", corev1.ReadWriteOnce), wantState: controller.ProvisioningFinished, wantErr: "ignored"},
		{name: "no node selected", node: "", claim: newClaim("1Mi", corev1.ReadWriteOnce), wantState: controller.ProvisioningFinished, wantErr: "needs volumeBindingMode WaitForFirstConsumer"},
		{name: "shared by nodes", node: "node-a", claim: newClaim("1Mi", corev1.ReadWriteMany), wantState: controller.ProvisioningFinished, wantErr: "access mode ReadWriteMany"},
		{name: "no room on the node", node: "node-a", claim: newClaim("1Ei", corev1.ReadWriteOnce), wantState: controller.ProvisioningReschedule, wantErr: "node node-a has no room for the claim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newNodeProvisioner(t)
			pv, state, err := p.Provision(context.Background(), controller.ProvisionOptions{StorageClass: class, PVName: "pvc-1", PVC: tc.claim, SelectedNodeName: tc.node})
			if state != tc.wantState {
				t.Errorf("state %s, want %s", state, tc.wantState)
			}
			dir := filepath.Join(p.root, "pvc-1_ns_data")
			switch {
			case tc.wantErr == "ignored":
				var ignored *controller.IgnoredError
				if !errors.As(err, &ignored) {
					t.Errorf("error %v, want IgnoredError", err)
				}
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want one saying %q", err, tc.wantErr)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if pv.Spec.Local == nil || pv.Spec.Local.Path != dir || pv.Annotations[NodeAnnotation] != "node-a" ||
					pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Spec.MountOptions[0] != "noatime" {
					t.Errorf("volume %+v; want a local volume at %s of node-a, reclaim Delete, the class's mount options", pv, dir)
				}
				if got := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]; got.Key != corev1.LabelHostname || got.Values[0] != "host-a" {
					t.Errorf("node affinity %+v, want hostname host-a", got)
				}
				fi, err := os.Stat(dir)
				if err != nil || fi.Mode().Perm() != 0o777 {
					t.Errorf("volume directory: %v, %v; want mode 0777", fi, err)
				}
				return
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused claim left %s: %v", dir, err)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	newPV := func(node, path string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1", Annotations: map[string]string{NodeAnnotation: node}},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}}}}
	}
	for _, tc := range []struct {
		name    string
		node    string
		path    func(root string) string
		wantErr string
		gone    bool
	}{
		{name: "the volume's directory goes", node: "node-a", path: func(root string) string { return filepath.Join(root, "pvc-1_ns_data") }, gone: true},
		{name: "another node's volume", node: "node-b", path: func(root string) string { return filepath.Join(root, "pvc-1_ns_data") }, wantErr: "ignored"},
		{name: "a path out of the storage", node: "node-a", path: func(root string) string { return filepath.Dir(root) }, wantErr: "not removed"},
		{name: "a path climbing out", node: "node-a", path: func(root string) string { return root + "/../x" }, wantErr: "not removed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newNodeProvisioner(t)
			path := tc.path(p.root)
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(path, "file"), []byte("data"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := p.Delete(context.Background(), newPV(tc.node, path))
			var ignored *controller.IgnoredError
			switch {
			case tc.wantErr == "ignored" && !errors.As(err, &ignored):
				t.Errorf("error %v, want IgnoredError", err)
			case tc.wantErr != "" && tc.wantErr != "ignored" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one saying %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(path, "file")); errors.Is(err, os.ErrNotExist) != tc.gone {
				t.Errorf("after Delete, %s/file: %v; want it gone: %v", path, err, tc.gone)
			}
		})
	}
}
