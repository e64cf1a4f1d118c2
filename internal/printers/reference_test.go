package printers

import (
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// s is one second, for compact ages in fixtures.
const s = time.Second

// TestFirstRowMatchesReference rebuilds the object behind each capture's
// firstRow and checks the cells, JSON types included (counts are integers).
func TestFirstRowMatchesReference(t *testing.T) {
	tests := map[string]runtime.Object{
		"namespaces":      namespaceObj("default", 6*s),
		"services":        headlessService(1 * s),
		"endpoints":       webEndpoints(1 * s),
		"endpointslices":  kubernetesSlice(t, 6*s),
		"configmaps":      cfgConfigMap(1 * s),
		"secrets":         opaqueSecret(1 * s),
		"events":          probeEvent(1 * s),
		"leases":          meLease(1 * s),
		"serviceaccounts": botServiceAccount(1 * s),
		"servicecidrs":    kubernetesServiceCIDR(t, 7*s),
		"ipaddresses":     serviceIPAddress("10.96.0.1", "default", "kubernetes", 6*s),
	}
	ctors := constructors()
	if len(tests) != len(ctors) {
		t.Fatalf("%d cases for %d constructors", len(tests), len(ctors))
	}
	for resource, obj := range tests {
		t.Run(resource, func(t *testing.T) {
			want := loadReference(t, resource).FirstRow
			got := asJSON(t, cells(t, ctors[resource](), obj))
			if !reflect.DeepEqual(got, interface{}(want)) {
				t.Errorf("cells\n got %#v\nwant %#v", got, want)
			}
		})
	}
}

// TestKubectlOutput renders whole lists the way `kubectl get -A -o wide`
// does and compares them with what kubectl printed against kube-apiserver.
func TestKubectlOutput(t *testing.T) {
	tests := []struct {
		command    string
		table      *Table
		list       runtime.Object
		namespaced bool
	}{{
		command: "kubectl get namespaces -A -o wide",
		table:   Namespaces(),
		list: &corev1.NamespaceList{Items: []corev1.Namespace{
			*namespaceObj("default", 5*s), *namespaceObj("demo", 1*s), *namespaceObj("kube-node-lease", 5*s),
			*namespaceObj("kube-public", 5*s), *namespaceObj("kube-system", 5*s),
		}},
	}, {
		command: "kubectl get services -A -o wide",
		table:   Services(),
		list: &corev1.ServiceList{Items: []corev1.Service{
			*kubernetesService(t, 4*s), *headlessService(0), *nodePortService(t, 1*s), *webService(1 * s),
		}},
		namespaced: true,
	}, {
		command:    "kubectl get endpoints -A -o wide",
		table:      Endpoints(),
		list:       &corev1.EndpointsList{Items: []corev1.Endpoints{*kubernetesEndpoints(t, 4*s), *webEndpoints(0)}},
		namespaced: true,
	}, {
		command:    "kubectl get endpointslices -A -o wide",
		table:      EndpointSlices(),
		list:       &discoveryv1.EndpointSliceList{Items: []discoveryv1.EndpointSlice{*kubernetesSlice(t, 4*s)}},
		namespaced: true,
	}, {
		command:    "kubectl get configmaps -A -o wide",
		table:      ConfigMaps(),
		list:       &corev1.ConfigMapList{Items: []corev1.ConfigMap{*cfgConfigMap(0), *trackingConfigMap(t, 5*s)}},
		namespaced: true,
	}, {
		command:    "kubectl get secrets -A -o wide",
		table:      Secrets(),
		list:       &corev1.SecretList{Items: []corev1.Secret{*opaqueSecret(0)}},
		namespaced: true,
	}, {
		command:    "kubectl get serviceaccounts -A -o wide",
		table:      ServiceAccounts(),
		list:       &corev1.ServiceAccountList{Items: []corev1.ServiceAccount{*botServiceAccount(0)}},
		namespaced: true,
	}, {
		command:    "kubectl get events -A -o wide",
		table:      Events(),
		list:       &corev1.EventList{Items: []corev1.Event{*probeEvent(0)}},
		namespaced: true,
	}, {
		command:    "kubectl get leases -A -o wide",
		table:      Leases(),
		list:       &coordinationv1.LeaseList{Items: []coordinationv1.Lease{*meLease(0), *apiserverLease(t, 5*s)}},
		namespaced: true,
	}, {
		command: "kubectl get servicecidrs -A -o wide",
		table:   ServiceCIDRs(),
		list:    &networkingv1.ServiceCIDRList{Items: []networkingv1.ServiceCIDR{*kubernetesServiceCIDR(t, 5*s)}},
	}, {
		command: "kubectl get ipaddresses -A -o wide",
		table:   IPAddresses(),
		list: &networkingv1.IPAddressList{Items: []networkingv1.IPAddress{
			*serviceIPAddress("10.96.0.1", "default", "kubernetes", 5*s),
			*serviceIPAddress("10.96.115.172", "demo", "np", 1*s),
			*serviceIPAddress("10.96.202.200", "demo", "web", 1*s),
		}},
	}}
	for _, tc := range tests {
		t.Run(tc.command, func(t *testing.T) {
			got := renderWide(t, convert(t, tc.table, tc.list), tc.namespaced)
			if want := kubectlOutput(t, tc.command); got != want {
				t.Errorf("output differs\n got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestIPAddressRowsCarryAge pins the upstream quirk: rows have one more cell
// (the age) than there are columns.
func TestIPAddressRowsCarryAge(t *testing.T) {
	tbl := convert(t, IPAddresses(), serviceIPAddress("10.96.0.1", "default", "kubernetes", 90*s))
	if n := len(tbl.ColumnDefinitions); n != 2 {
		t.Fatalf("got %d columns, want 2", n)
	}
	want := []interface{}{"10.96.0.1", "services/default/kubernetes", "90s"}
	if got := tbl.Rows[0].Cells; !reflect.DeepEqual(got, want) {
		t.Errorf("cells %v, want %v", got, want)
	}
}
