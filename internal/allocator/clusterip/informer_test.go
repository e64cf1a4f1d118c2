package clusterip

import (
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func TestIndexedListerAnswersAsTheLister(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	plain := factory.Networking().V1().IPAddresses()
	indexed, err := NewIndexedInformer(plain)
	if err != nil {
		t.Fatal(err)
	}
	objs := []struct {
		name   string
		labels map[string]string
	}{
		{"10.0.0.1", map[string]string{networkingv1.LabelIPAddressFamily: "IPv4", networkingv1.LabelManagedBy: "ipallocator.k8s.io"}},
		{"10.0.0.2", map[string]string{networkingv1.LabelIPAddressFamily: "IPv4", networkingv1.LabelManagedBy: "ipallocator.k8s.io", "x": "y"}},
		{"fd00::1", map[string]string{networkingv1.LabelIPAddressFamily: "IPv6", networkingv1.LabelManagedBy: "ipallocator.k8s.io"}},
		{"10.0.0.3", map[string]string{networkingv1.LabelIPAddressFamily: "IPv4", networkingv1.LabelManagedBy: "someone-else"}},
		{"10.0.0.4", map[string]string{networkingv1.LabelIPAddressFamily: "IPv4"}},
		{"10.0.0.5", nil},
	}
	for _, o := range objs {
		if err := plain.Informer().GetIndexer().Add(&networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: o.name, Labels: o.labels}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, selector := range []string{
		"ipaddress.kubernetes.io/ip-family=IPv4,ipaddress.kubernetes.io/managed-by=ipallocator.k8s.io",
		"ipaddress.kubernetes.io/ip-family=IPv6,ipaddress.kubernetes.io/managed-by=ipallocator.k8s.io",
		"ipaddress.kubernetes.io/ip-family==IPv4,ipaddress.kubernetes.io/managed-by=someone-else",
		"ipaddress.kubernetes.io/ip-family=IPv4",
		"ipaddress.kubernetes.io/ip-family=IPv4,ipaddress.kubernetes.io/managed-by=ipallocator.k8s.io,x=y",
		"ipaddress.kubernetes.io/ip-family in (IPv4,IPv6),ipaddress.kubernetes.io/managed-by=ipallocator.k8s.io",
		"ipaddress.kubernetes.io/ip-family!=IPv6,ipaddress.kubernetes.io/managed-by=ipallocator.k8s.io",
		"",
	} {
		t.Run(selector, func(t *testing.T) {
			sel, err := labels.Parse(selector)
			if err != nil {
				t.Fatal(err)
			}
			want, err := plain.Lister().List(sel)
			if err != nil {
				t.Fatal(err)
			}
			got, err := indexed.Lister().List(sel)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := names(got), names(want); !slices.Equal(g, w) {
				t.Errorf("indexed List = %v, the lister's = %v", g, w)
			}
		})
	}
}

func names(ips []*networkingv1.IPAddress) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, ip.Name)
	}
	slices.Sort(out)
	return out
}
