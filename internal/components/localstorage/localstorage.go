// Package localstorage gives PersistentVolumeClaims volumes that are
// directories on the node their Pod lands on: k3s's local-path storage,
// on the external provisioner library (sig-storage-lib-external-provisioner).
//
// The server creates the default StorageClass local-path
// (WaitForFirstConsumer, reclaim policy Delete). Each node (`kubeboot
// agent`, `kubeboot server --node`) provisions the claims the scheduler
// places on it, in a directory of its own under its storage path
// (--default-local-storage-path), and removes the directory when the
// claim's volume is released. A node acts as its agent
// (nodejoin.AgentUser): RBAC lets the agents write PersistentVolumes, and
// a ValidatingAdmissionPolicy lets each write only its own node's, as
// NodeRestriction does for the kubelets. The server
// provisions the claims placed on simulated nodes, which have no disk:
// their volumes are the PersistentVolume objects alone.
package localstorage

import (
	"context"
	"fmt"
	"path/filepath"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/nodejoin"
	"github.com/kubeboot/kubeboot/internal/platform/simulated"
)

const (
	// ClassName is the StorageClass the server creates, the cluster's
	// default.
	ClassName = "local-path"
	// ProvisionerName is the class's provisioner.
	ProvisionerName = "kubeboot.io/local-path"
	// NodeAnnotation on a PersistentVolume names the node whose directory
	// backs it.
	NodeAnnotation = "local-path.kubeboot.io/node"
	// User is the user the server provisions the simulated nodes' claims
	// as.
	User = "system:kubeboot:local-path"
	// DirName is the storage path's default name: <data-dir>/storage, as
	// k3s's /var/lib/rancher/k3s/storage.
	DirName = "storage"

	// policyName names the policy and its binding.
	policyName = "kubeboot-local-path-nodes"
)

// rules are the rights of the provisioners, the nodes' and the server's.
var rules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "update"}},
	{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "watch", "create", "delete", "patch"}},
	{APIGroups: []string{storagev1.GroupName}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
}

// Component is local storage as a component of a server: the StorageClass,
// the nodes' rights, and the simulated nodes' provisioner.
type Component struct {
	simulatedNodes bool
}

// New returns the component; with simulatedNodes it provisions the
// claims placed on the server's simulated nodes too.
func New(simulatedNodes bool) *Component { return &Component{simulatedNodes: simulatedNodes} }

// Name implements controlplane.Component.
func (*Component) Name() string { return "local storage" }

// Complete implements controlplane.Component.
func (*Component) Complete(controlplane.Settings) (controlplane.Needs, error) {
	return controlplane.Needs{
		User:    User,
		Grant:   grant,
		Allowed: authorizationv1.ResourceAttributes{Verb: "create", Resource: "persistentvolumes"},
	}, nil
}

// grant gives the server's user and the nodes' agents the provisioners'
// rights, and admits an agent's writes only to its own node's
// PersistentVolumes.
func grant(ctx context.Context, client kubernetes.Interface) error {
	if err := controlplane.GrantClusterRoleTo(User, []rbacv1.Subject{
		{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: User},
		{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: nodejoin.AgentsGroup},
	}, rules...)(ctx, client); err != nil {
		return err
	}
	// The object a node writes, or for a delete the one it removes,
	// must be annotated with the node's name: the user's name's end.
	object := "(request.operation == 'DELETE' ? oldObject : object)"
	return nodejoin.ApplyAgentPolicy(ctx, client, policyName, []string{"persistentvolumes"},
		fmt.Sprintf("has(%[1]s.metadata.annotations) && %[2]q in %[1]s.metadata.annotations && ", object, NodeAnnotation)+
			nodejoin.IsOwnAgent(fmt.Sprintf("%s.metadata.annotations[%q]", object, NodeAnnotation)),
		"a node's local storage writes only the PersistentVolumes of its own node")
}

// Run implements controlplane.Component: it creates the StorageClass
// unless it exists (a user's changes to it stay), then provisions the
// simulated nodes' claims.
func (c *Component) Run(ctx context.Context, s *controlplane.Server) error {
	client, err := s.Client(User)
	if err != nil {
		return err
	}
	admin, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		return err
	}
	if err := ensureClass(ctx, admin); err != nil {
		return err
	}
	if !c.simulatedNodes {
		<-ctx.Done()
		return nil
	}
	// The simulated nodes are those kwok's label marks; their copies are
	// the process's other informers'.
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = simulated.NodeSelector()
	}), informers.WithTransform(s.SharedObjects().Selected(simulated.Selected)))
	nodes := factory.Core().V1().Nodes().Lister()
	factory.StartWithContext(ctx)
	defer factory.Shutdown()
	factory.WaitForCacheSync(ctx.Done())
	run(ctx, client, &provisioner{client: client, root: filepath.Join("/", DirName), serves: func(node string) bool {
		_, err := nodes.Get(node)
		return err == nil
	}})
	return nil
}

// ensureClass creates the default StorageClass unless it exists.
func ensureClass(ctx context.Context, client kubernetes.Interface) error {
	class := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: ClassName,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       ProvisionerName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	if _, err := client.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("StorageClass %s: %w", ClassName, err)
	}
	return nil
}

// RunNode provisions the claims placed on node, in directories under root,
// until ctx is done; client acts as node's agent (nodejoin.AgentUser).
func RunNode(ctx context.Context, client kubernetes.Interface, node, root string) {
	run(ctx, client, &provisioner{client: client, root: root, makeDirs: true,
		serves: func(n string) bool { return n == node }})
}

// run runs the library's controller on p until ctx is done. Each node's
// provisioner is the only one for its node, so none elects a leader.
func run(ctx context.Context, client kubernetes.Interface, p *provisioner) {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithName("local-path"))
	controller.NewProvisionController(ctx, client, ProvisionerName, p,
		controller.LeaderElection(false),
	).Run(ctx)
}
