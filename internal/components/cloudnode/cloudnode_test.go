package cloudnode

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
)

// TestInstanceMetadata: a node's addresses are its kubelet's --node-ip and
// its agent's external addresses, of either family.
func TestInstanceMetadata(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        []corev1.NodeAddress
		wantErr     bool
	}{
		{"internal and external", map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: "10.0.0.2", ExternalIPsAnnotation: "203.0.113.2"},
			[]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.2"}}, false},
		{"dual-stack", map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: "10.0.0.2,fd00::2", ExternalIPsAnnotation: "203.0.113.2,2001:db8::2"},
			[]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}, {Type: corev1.NodeInternalIP, Address: "fd00::2"},
				{Type: corev1.NodeExternalIP, Address: "203.0.113.2"}, {Type: corev1.NodeExternalIP, Address: "2001:db8::2"}}, false},
		{"no external address (any more)", map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: "10.0.0.2"},
			[]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}}, false},
		{"no --node-ip", map[string]string{ExternalIPsAnnotation: "203.0.113.2"}, nil, true},
		{"an annotation not of addresses", map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: "10.0.0.2", ExternalIPsAnnotation: "far-away"}, nil, true},
	} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: tc.annotations}}
		got, err := cloud{}.InstanceMetadata(context.Background(), node)
		if tc.wantErr {
			if err == nil {
				t.Errorf("%s: %+v, want an error", tc.name, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got.NodeAddresses, tc.want) || got.ProviderID != "kubeboot://n" {
			t.Errorf("%s: %+v, %v; want addresses %v", tc.name, got, err, tc.want)
		}
	}
}

// TestInitializesNode runs upstream's controller with this cloud on a
// labelled node that registered with the uninitialized taint: the node
// gets its external address, its provider ID, and loses the taint.
func TestInitializesNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Labels: map[string]string{Label: "true"}, Annotations: map[string]string{
			cloudproviderapi.AnnotationAlphaProvidedIPAddr: "10.0.0.2", ExternalIPsAnnotation: "203.0.113.2"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}, {Type: corev1.NodeHostName, Address: "agent"}}},
	}
	client := fake.NewClientset(node)
	factory := informers.NewSharedInformerFactory(client, 0)
	controller, err := nodecontroller.NewCloudNodeController(factory.Core().V1().Nodes(), client, cloud{}, time.Hour, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	go controller.RunWithContext(ctx, controllersmetrics.NewControllerManagerMetrics("test"))

	want := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.2"}, {Type: corev1.NodeHostName, Address: "agent"}}
	var got *corev1.Node
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err = client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		return err == nil && len(got.Spec.Taints) == 0 && slices.Equal(got.Status.Addresses, want), nil
	})
	if err != nil {
		t.Fatalf("node %+v %+v, want no taint and addresses %v", got.Spec, got.Status.Addresses, want)
	}
	if got.Spec.ProviderID != "kubeboot://agent" {
		t.Errorf("provider ID %q", got.Spec.ProviderID)
	}
}

// TestPublishExternalIPs: the agent's patch labels and annotates its Node,
// and unlabels it once it names no external address.
func TestPublishExternalIPs(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent"}})
	for _, addrs := range [][]netip.Addr{{netip.MustParseAddr("203.0.113.2"), netip.MustParseAddr("2001:db8::2")}, nil} {
		if err := PublishExternalIPs(ctx, client, "agent", addrs); err != nil {
			t.Fatal(err)
		}
		node, err := client.CoreV1().Nodes().Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{true: "203.0.113.2,2001:db8::2", false: ""}[addrs != nil]
		_, labelled := node.Labels[Label]
		if labelled != (addrs != nil) || node.Annotations[ExternalIPsAnnotation] != want {
			t.Errorf("after publishing %v: labels %v, annotations %v", addrs, node.Labels, node.Annotations)
		}
	}
}
