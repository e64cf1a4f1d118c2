// Package cloudnode gives nodes the external addresses their hosts name
// (--node-external-ip), as k3s's embedded cloud controller manager does:
// upstream's cloud node controller (k8s.io/cloud-provider) runs in each
// server with a cloud provider whose instances are the nodes' own word.
//
// A node with external addresses runs its kubelet with
// --cloud-provider=external: it registers with the
// node.cloudprovider.kubernetes.io/uninitialized taint, publishes its
// --node-ip (alpha.kubernetes.io/provided-node-ip) and leaves its
// addresses to the controller from then on. The node's agent labels its
// Node (Label) and annotates it with its external addresses
// (ExternalIPsAnnotation, PublishExternalIPs); the controller, which
// watches only labelled Nodes, lists the node's InternalIPs, ExternalIPs
// and hostname and removes the taint. A kubelet that sets its addresses
// itself overwrites any others at every status update, which is why the
// addresses go through the controller.
package cloudnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/network"
)

const (
	// User is the user the controller acts as.
	User = "system:kubeboot:cloud-node-controller"
	// Label marks the Nodes whose addresses the controller keeps: those
	// of nodes with external addresses.
	Label = "node.kubeboot.io/external-ip"
	// ExternalIPsAnnotation holds a node's external addresses,
	// comma-separated, as its agent publishes them.
	ExternalIPsAnnotation = "node.kubeboot.io/external-ip"
	// ProviderName is the cloud provider's name, and the scheme of the
	// nodes' provider IDs (kubeboot://<node>).
	ProviderName = "kubeboot"
	// statusUpdateFrequency is how often the controller checks the
	// initialized nodes' addresses against their annotations; a change
	// of the annotation is seen at once (the informer's update).
	statusUpdateFrequency = time.Minute
)

// Component is the cloud node controller as a component of a server.
type Component struct{}

// New returns the controller.
func New() *Component { return &Component{} }

// Name implements controlplane.Component.
func (*Component) Name() string { return "cloud node controller" }

// Complete implements controlplane.Component: the rights of upstream's
// cloud node controller (its system:cloud-controller-manager role's,
// for Nodes and events).
func (*Component) Complete(controlplane.Settings) (controlplane.Needs, error) {
	return controlplane.Needs{
		User: User,
		Grant: controlplane.GrantClusterRole(User, User,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch", "update"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		),
		Allowed: authorizationv1.ResourceAttributes{Verb: "patch", Resource: "nodes", Subresource: "status"},
	}, nil
}

// Run implements controlplane.Component: it runs the controller on the
// labelled Nodes until ctx is done.
func (*Component) Run(ctx context.Context, s *controlplane.Server) error {
	client, err := s.Client(User)
	if err != nil {
		return err
	}
	// Only the labelled Nodes: a cluster without external addresses
	// costs one watch, and no Node copies.
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = Label }),
		informers.WithTransform(s.SharedObjects().Selected(labelled)))
	nodes := factory.Core().V1().Nodes()
	controller, err := nodecontroller.NewCloudNodeController(nodes, client, cloud{}, statusUpdateFrequency, 1, 1)
	if err != nil {
		return err
	}
	factory.StartWithContext(ctx)
	defer factory.Shutdown()
	controller.RunWithContext(ctx, controllersmetrics.NewControllerManagerMetrics("kubeboot"))
	return nil
}

// PublishExternalIPs labels and annotates the Node name with its
// external addresses (none: neither), through its agent's client, once
// the kubelet has registered it; it retries until ctx is done.
func PublishExternalIPs(ctx context.Context, client kubernetes.Interface, name string, addrs []netip.Addr) error {
	value := network.AddrsValue{Addrs: &addrs}.String()
	var label, annotation any // null: removed
	if value != "" {
		label, annotation = "true", value
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels": map[string]any{Label: label}, "annotations": map[string]any{ExternalIPsAnnotation: annotation}}})
	if err != nil {
		return err
	}
	for {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if published(node, value) {
				return nil
			}
			if _, err = client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}); err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("publishing the node's external addresses: %w", err)
		case <-time.After(time.Second):
		}
	}
}

// published reports whether node's label and annotation say value, its
// external addresses ("": none).
func published(node *corev1.Node, value string) bool {
	_, labelled := node.Labels[Label]
	got, annotated := node.Annotations[ExternalIPsAnnotation]
	if value == "" {
		return !labelled && !annotated
	}
	return labelled && got == value
}

// cloud is the cloud provider of the nodes' own word: only instances,
// whose metadata its InstancesV2 reads from the Node.
type cloud struct{}

func (cloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool)                  { return nil, false }
func (cloud) Instances() (cloudprovider.Instances, bool)                        { return nil, false }
func (c cloud) InstancesV2() (cloudprovider.InstancesV2, bool)                  { return c, true }
func (cloud) Zones() (cloudprovider.Zones, bool)                                { return nil, false }
func (cloud) Clusters() (cloudprovider.Clusters, bool)                          { return nil, false }
func (cloud) Routes() (cloudprovider.Routes, bool)                              { return nil, false }
func (cloud) ProviderName() string                                              { return ProviderName }
func (cloud) HasClusterID() bool                                                { return false }

// InstanceExists: a node exists while its Node does.
func (cloud) InstanceExists(context.Context, *corev1.Node) (bool, error) { return true, nil }

// InstanceShutdown: a node's shutdown is the kubelet's to report.
func (cloud) InstanceShutdown(context.Context, *corev1.Node) (bool, error) { return false, nil }

// InstanceMetadata lists node's addresses: its kubelet's --node-ip as
// InternalIPs, its agent's external addresses as ExternalIPs (the
// controller adds the hostname the kubelet listed).
func (cloud) InstanceMetadata(_ context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	internal := node.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr]
	if internal == "" {
		return nil, fmt.Errorf("node %s has no %s annotation: its kubelet runs without --node-ip or --cloud-provider=external", node.Name, cloudproviderapi.AnnotationAlphaProvidedIPAddr)
	}
	var addrs []corev1.NodeAddress
	for _, a := range []struct {
		kind  corev1.NodeAddressType
		value string
	}{{corev1.NodeInternalIP, internal}, {corev1.NodeExternalIP, node.Annotations[ExternalIPsAnnotation]}} {
		if a.value == "" {
			continue
		}
		ips, err := network.ParseAddrs(string(a.kind), a.value)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", node.Name, err)
		}
		for _, ip := range ips {
			addrs = append(addrs, corev1.NodeAddress{Type: a.kind, Address: ip.String()})
		}
	}
	return &cloudprovider.InstanceMetadata{ProviderID: ProviderName + "://" + node.Name, NodeAddresses: addrs}, nil
}

// labelled is the informer's label selector (Label) as a predicate.
func labelled(obj any) bool {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return false
	}
	_, has := node.Labels[Label]
	return has
}
