package validation

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ipAddress(name string, ref *networkingv1.ParentReference) *networkingv1.IPAddress {
	return &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"},
		Spec:       networkingv1.IPAddressSpec{ParentRef: ref},
	}
}

func serviceRef(name string) *networkingv1.ParentReference {
	return &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: name}
}

func TestValidateIPAddress(t *testing.T) {
	tests := []struct {
		name string
		ip   *networkingv1.IPAddress
		want []string
	}{
		{name: "kubernetes service IP", ip: ipAddress("10.0.0.1", serviceRef("kubernetes"))},
		{name: "IPv6", ip: ipAddress("fd00::1", serviceRef("web"))},
		{name: "group set", ip: ipAddress("10.0.0.2", &networkingv1.ParentReference{Group: "gateway.networking.k8s.io", Resource: "gateways", Name: "gw"})},
		{name: "not canonical", ip: ipAddress("fd00:0::1", serviceRef("web")),
			want: []string{`metadata.name: Invalid value: "fd00:0::1": must be in canonical form ("fd00::1")`}},
		{name: "leading zeros", ip: ipAddress("10.0.0.01", serviceRef("web")),
			want: []string{`metadata.name: Invalid value: "10.0.0.01": must not have leading 0s`}},
		{name: "not an IP", ip: ipAddress("web", serviceRef("web")),
			want: []string{`metadata.name: Invalid value: "web": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`}},
		{name: "no parentRef", ip: ipAddress("10.0.0.1", nil), want: []string{`spec.parentRef: Required value`}},
		{name: "incomplete parentRef", ip: ipAddress("10.0.0.1", &networkingv1.ParentReference{Group: "Bad_Group", Namespace: "a/b"}),
			want: []string{
				`spec.parentRef.group: Invalid value: "Bad_Group": ` + dns1123SubdomainMsg,
				`spec.parentRef.resource: Required value`,
				`spec.parentRef.name: Required value`,
				`spec.parentRef.namespace: Invalid value: "a/b": may not contain '/'`,
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateIPAddress(tc.ip), tc.want)
		})
	}
}

func TestValidateIPAddressUpdate(t *testing.T) {
	old := ipAddress("10.0.0.1", serviceRef("kubernetes"))
	tests := []struct {
		name   string
		mutate func(*networkingv1.IPAddress)
		want   []string
	}{
		{name: "labels change", mutate: func(ip *networkingv1.IPAddress) { ip.Labels = map[string]string{"a": "b"} }},
		{name: "owner changes", mutate: func(ip *networkingv1.IPAddress) { ip.Spec.ParentRef.Name = "web" },
			want: []string{`spec.parentRef: Invalid value: {"resource":"services","namespace":"default","name":"web"}: field is immutable`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ip := old.DeepCopy()
			tc.mutate(ip)
			checkErrors(t, ValidateIPAddressUpdate(ip, old), tc.want)
		})
	}
}
