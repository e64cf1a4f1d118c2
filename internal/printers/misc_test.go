package printers

import (
	"reflect"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestSimpleResourceCells covers the resources whose cells need no more than
// a case or two each.
func TestSimpleResourceCells(t *testing.T) {
	terminating := namespaceObj("old", 3*s)
	terminating.Status.Phase = corev1.NamespaceTerminating

	binary := cfgConfigMap(3 * s)
	binary.BinaryData = map[string][]byte{"bin": {0}, "bin2": {1}}

	tokenSecret := opaqueSecret(3 * s)
	tokenSecret.Type = corev1.SecretTypeServiceAccountToken
	tokenSecret.Data = map[string][]byte{"token": nil, "ca.crt": nil, "namespace": nil}

	stringData := opaqueSecret(3 * s)
	stringData.StringData = map[string]string{"k": "dup", "extra": "v"}

	unheld := meLease(3 * s)
	unheld.Spec.HolderIdentity = nil

	withSecrets := botServiceAccount(3 * s)
	withSecrets.Secrets = []corev1.ObjectReference{{Name: "legacy-token"}}

	dualStack := kubernetesServiceCIDR(t, 3*s)
	dualStack.Spec.CIDRs = []string{"10.96.0.0/16", "fd00:10:96::/112"}

	grouped := serviceIPAddress("10.0.0.5", "", "gw", 3*s)
	grouped.Spec.ParentRef.Group, grouped.Spec.ParentRef.Resource = "Gateway.Networking.K8s.io", "Gateways"

	orphan := serviceIPAddress("10.0.0.6", "", "", 3*s)
	orphan.Spec.ParentRef = nil

	tests := []struct {
		name  string
		table *Table
		obj   runtime.Object
		want  []interface{}
	}{
		{"namespace terminating", Namespaces(), terminating, []interface{}{"old", "Terminating", "3s"}},
		{"configmap counts binaryData", ConfigMaps(), binary, []interface{}{"cfg", int64(3), "3s"}},
		{"configmap empty", ConfigMaps(), &corev1.ConfigMap{ObjectMeta: objectMeta("demo", "e", 3*s)}, []interface{}{"e", int64(0), "3s"}},
		{"secret type and keys", Secrets(), tokenSecret, []interface{}{"sec", "kubernetes.io/service-account-token", int64(3), "3s"}},
		{"secret stringData not yet folded", Secrets(), stringData, []interface{}{"sec", "Opaque", int64(2), "3s"}},
		{"lease holder", Leases(), meLease(3 * s), []interface{}{"l1", "me", "3s"}},
		{"lease without holder", Leases(), unheld, []interface{}{"l1", "", "3s"}},
		{"serviceaccount secrets are not printed", ServiceAccounts(), withSecrets, []interface{}{"bot", "3s"}},
		{"servicecidr dual stack", ServiceCIDRs(), dualStack, []interface{}{"kubernetes", "10.96.0.0/16,fd00:10:96::/112", "3s"}},
		{"ipaddress cluster-scoped grouped parent", IPAddresses(), grouped, []interface{}{"10.0.0.5", "gateways.gateway.networking.k8s.io/gw", "3s"}},
		{"ipaddress without parent", IPAddresses(), orphan, []interface{}{"10.0.0.6", "<none>", "3s"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := cells(t, tc.table, tc.obj); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cells\n got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

// TestListsOfEveryResource converts a list of each resource type.
func TestListsOfEveryResource(t *testing.T) {
	tests := map[string]runtime.Object{
		"namespaces":      &corev1.NamespaceList{Items: []corev1.Namespace{*namespaceObj("a", s), *namespaceObj("b", s)}},
		"services":        &corev1.ServiceList{Items: []corev1.Service{*headlessService(s), *webService(s)}},
		"endpoints":       &corev1.EndpointsList{Items: []corev1.Endpoints{*webEndpoints(s), *webEndpoints(s)}},
		"endpointslices":  &discoveryv1.EndpointSliceList{Items: []discoveryv1.EndpointSlice{*kubernetesSlice(t, s), *kubernetesSlice(t, s)}},
		"configmaps":      &corev1.ConfigMapList{Items: []corev1.ConfigMap{*cfgConfigMap(s), *cfgConfigMap(s)}},
		"secrets":         &corev1.SecretList{Items: []corev1.Secret{*opaqueSecret(s), *opaqueSecret(s)}},
		"events":          &corev1.EventList{Items: []corev1.Event{*probeEvent(s), *probeEvent(s)}},
		"leases":          &coordinationv1.LeaseList{Items: []coordinationv1.Lease{*meLease(s), *meLease(s)}},
		"serviceaccounts": &corev1.ServiceAccountList{Items: []corev1.ServiceAccount{*botServiceAccount(s), *botServiceAccount(s)}},
		"servicecidrs":    &networkingv1.ServiceCIDRList{Items: []networkingv1.ServiceCIDR{*kubernetesServiceCIDR(t, s), *kubernetesServiceCIDR(t, s)}},
		"ipaddresses":     &networkingv1.IPAddressList{Items: []networkingv1.IPAddress{*serviceIPAddress("a", "", "x", s), *serviceIPAddress("b", "", "y", s)}},
	}
	for resource, ctor := range constructors() {
		t.Run(resource, func(t *testing.T) {
			tbl := convert(t, ctor(), tests[resource])
			if len(tbl.Rows) != 2 {
				t.Fatalf("got %d rows, want 2", len(tbl.Rows))
			}
			for _, row := range tbl.Rows {
				if len(row.Cells) < len(tbl.ColumnDefinitions) {
					t.Errorf("row has %d cells for %d columns", len(row.Cells), len(tbl.ColumnDefinitions))
				}
			}
		})
	}
}
