package printers

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestServiceCells(t *testing.T) {
	svc := func(typ corev1.ServiceType, mutate func(*corev1.Service)) *corev1.Service {
		v := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "s", CreationTimestamp: ago(3 * s)},
			Spec: corev1.ServiceSpec{
				Type:       typ,
				ClusterIP:  "10.96.0.10",
				ClusterIPs: []string{"10.96.0.10"},
				Ports:      []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}},
			},
		}
		if mutate != nil {
			mutate(v)
		}
		return v
	}
	tests := []struct {
		name string
		svc  *corev1.Service
		want []interface{}
	}{{
		name: "cluster IP",
		svc:  svc(corev1.ServiceTypeClusterIP, func(v *corev1.Service) { v.Spec.Selector = map[string]string{"b": "2", "a": "1"} }),
		want: []interface{}{"s", "ClusterIP", "10.96.0.10", "<none>", "80/TCP", "3s", "a=1,b=2"},
	}, {
		name: "headless without ports",
		svc:  headlessService(3 * s),
		want: []interface{}{"hl", "ClusterIP", "None", "<none>", "<none>", "3s", "app=hl"},
	}, {
		name: "external IPs",
		svc: svc(corev1.ServiceTypeClusterIP, func(v *corev1.Service) {
			v.Spec.ExternalIPs = []string{"192.0.2.1", "192.0.2.2"}
		}),
		want: []interface{}{"s", "ClusterIP", "10.96.0.10", "192.0.2.1,192.0.2.2", "80/TCP", "3s", "<none>"},
	}, {
		name: "node ports",
		svc: svc(corev1.ServiceTypeNodePort, func(v *corev1.Service) {
			v.Spec.Ports = []corev1.ServicePort{
				{Port: 80, NodePort: 31715, Protocol: corev1.ProtocolTCP},
				{Port: 53, NodePort: 30053, Protocol: corev1.ProtocolUDP},
			}
		}),
		want: []interface{}{"s", "NodePort", "10.96.0.10", "<none>", "80:31715/TCP,53:30053/UDP", "3s", "<none>"},
	}, {
		name: "load balancer pending",
		svc:  svc(corev1.ServiceTypeLoadBalancer, nil),
		want: []interface{}{"s", "LoadBalancer", "10.96.0.10", "<pending>", "80/TCP", "3s", "<none>"},
	}, {
		name: "load balancer ingress, sorted and deduplicated, then external IPs",
		svc: svc(corev1.ServiceTypeLoadBalancer, func(v *corev1.Service) {
			v.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{
				{Hostname: "lb.example.com"}, {IP: "203.0.113.9"}, {IP: "203.0.113.9"}, {IP: "203.0.113.1", Hostname: "ignored"},
			}
			v.Spec.ExternalIPs = []string{"192.0.2.1"}
		}),
		want: []interface{}{"s", "LoadBalancer", "10.96.0.10", "203.0.113.1,203.0.113.9,lb.example.com,192.0.2.1", "80/TCP", "3s", "<none>"},
	}, {
		name: "load balancer with only external IPs",
		svc:  svc(corev1.ServiceTypeLoadBalancer, func(v *corev1.Service) { v.Spec.ExternalIPs = []string{"192.0.2.1"} }),
		want: []interface{}{"s", "LoadBalancer", "10.96.0.10", "192.0.2.1", "80/TCP", "3s", "<none>"},
	}, {
		name: "external name",
		svc: svc(corev1.ServiceTypeExternalName, func(v *corev1.Service) {
			v.Spec.ExternalName = "db.example.com"
			v.Spec.ClusterIP, v.Spec.ClusterIPs, v.Spec.Ports = "", nil, nil
		}),
		want: []interface{}{"s", "ExternalName", "<none>", "db.example.com", "<none>", "3s", "<none>"},
	}, {
		name: "dual stack shows the primary IP",
		svc:  svc(corev1.ServiceTypeClusterIP, func(v *corev1.Service) { v.Spec.ClusterIPs = []string{"10.96.0.10", "fd00::10"} }),
		want: []interface{}{"s", "ClusterIP", "10.96.0.10", "<none>", "80/TCP", "3s", "<none>"},
	}, {
		name: "clusterIPs not populated falls back to clusterIP",
		svc:  svc(corev1.ServiceTypeClusterIP, func(v *corev1.Service) { v.Spec.ClusterIPs = nil }),
		want: []interface{}{"s", "ClusterIP", "10.96.0.10", "<none>", "80/TCP", "3s", "<none>"},
	}, {
		name: "unknown type",
		svc:  svc("", nil),
		want: []interface{}{"s", "", "10.96.0.10", "<unknown>", "80/TCP", "3s", "<none>"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := cells(t, Services(), tc.svc); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cells\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
