package server

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestServiceLB: a LoadBalancer Service gets the Ready nodes' addresses
// as its ingress (k3s's ServiceLB); a second one on the same port waits,
// with a PortInUse event, and gets them once the first is gone; one of
// another loadBalancerClass is left to its controller.
func TestServiceLB(t *testing.T) {
	t.Parallel()
	_, client := harness.StartLocalServer(t, "--simulated-nodes=2")
	ctx := context.Background()
	var nodeIPs []string
	harness.Eventually(t, time.Minute, "two Ready simulated nodes", func(ctx context.Context) (bool, string) {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		nodeIPs = nil
		for _, n := range nodes.Items {
			for _, a := range n.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					nodeIPs = append(nodeIPs, a.Address)
				}
			}
		}
		slices.Sort(nodeIPs)
		return len(nodeIPs) == 2, fmt.Sprint(nodeIPs)
	})
	create := func(name string, class *string) {
		t.Helper()
		_, err := client.CoreV1().Services(metav1.NamespaceDefault).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class,
				Ports: []corev1.ServicePort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	ingress := func(ctx context.Context, name string) []string {
		svc, err := client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return []string{err.Error()}
		}
		var ips []string
		for _, i := range svc.Status.LoadBalancer.Ingress {
			ips = append(ips, i.IP)
		}
		return ips
	}

	create("first", nil)
	harness.Eventually(t, 30*time.Second, "first's ingress: the nodes' addresses", func(ctx context.Context) (bool, string) {
		got := ingress(ctx, "first")
		return slices.Equal(got, nodeIPs), fmt.Sprint(got)
	})
	create("second", nil)
	create("elsewhere", ptr.To("example.com/other"))
	harness.Eventually(t, 30*time.Second, "second's PortInUse event", func(ctx context.Context) (bool, string) {
		return hasEvent(ctx, client, "second", "PortInUse"), "no event"
	})
	if got := ingress(ctx, "second"); len(got) > 0 {
		t.Errorf("second got %v while first holds the port", got)
	}
	if err := client.CoreV1().Services(metav1.NamespaceDefault).Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "second's ingress once first is gone", func(ctx context.Context) (bool, string) {
		got := ingress(ctx, "second")
		return slices.Equal(got, nodeIPs), fmt.Sprint(got)
	})
	if got := ingress(ctx, "elsewhere"); len(got) > 0 {
		t.Errorf("a Service of another loadBalancerClass got %v", got)
	}
}

// hasEvent reports whether Service name in default has an event of reason.
func hasEvent(ctx context.Context, client kubernetes.Interface, name, reason string) bool {
	events, err := client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": name, "reason": reason}.String()})
	return err == nil && len(events.Items) > 0
}
