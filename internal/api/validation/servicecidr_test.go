package validation

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func serviceCIDR(cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", ResourceVersion: "1"},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: cidrs},
	}
}

func TestValidateServiceCIDR(t *testing.T) {
	tests := []struct {
		name string
		c    *networkingv1.ServiceCIDR
		want []string
	}{
		{name: "single-stack", c: serviceCIDR("10.96.0.0/12")},
		{name: "dual-stack", c: serviceCIDR("10.96.0.0/12", "fd00:10:96::/112")},
		{name: "no CIDRs", c: serviceCIDR(), want: []string{`spec.cidrs: Required value: at least one CIDR required`}},
		{name: "three CIDRs", c: serviceCIDR("10.96.0.0/12", "fd00::/112", "10.112.0.0/12"),
			want: []string{`spec.cidrs: Invalid value: {"cidrs":["10.96.0.0/12","fd00::/112","10.112.0.0/12"]}: may only hold up to 2 values`}},
		{name: "two of one family", c: serviceCIDR("10.96.0.0/12", "10.112.0.0/12"),
			want: []string{`spec.cidrs: Invalid value: {"cidrs":["10.96.0.0/12","10.112.0.0/12"]}: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64`}},
		{name: "host bits set", c: serviceCIDR("10.96.0.1/12"),
			want: []string{`spec.cidrs[0]: Invalid value: "10.96.0.1/12": must not have bits set beyond the prefix length`}},
		{name: "not canonical", c: serviceCIDR("fd00:0:0::/112"),
			want: []string{`spec.cidrs[0]: Invalid value: "fd00:0:0::/112": must be in canonical form ("fd00::/112")`}},
		{name: "namespaced", c: func() *networkingv1.ServiceCIDR { c := serviceCIDR("10.96.0.0/12"); c.Namespace = "default"; return c }(),
			want: []string{`metadata.namespace: Forbidden: not allowed on this type`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateServiceCIDR(tc.c), tc.want)
		})
	}
}

func TestValidateServiceCIDRUpdate(t *testing.T) {
	tests := []struct {
		name     string
		old, new []string
		want     []string
	}{
		{name: "unchanged", old: []string{"10.96.0.0/12"}, new: []string{"10.96.0.0/12"}},
		{name: "add the other family", old: []string{"10.96.0.0/12"}, new: []string{"10.96.0.0/12", "fd00::/112"}},
		{name: "change the range", old: []string{"10.96.0.0/12"}, new: []string{"10.112.0.0/12"},
			want: []string{`spec.cidrs[0]: Invalid value: "10.112.0.0/12": field is immutable`}},
		{name: "add the same family", old: []string{"10.96.0.0/12"}, new: []string{"10.96.0.0/12", "10.112.0.0/12"},
			want: []string{`spec.cidrs: Invalid value: {"cidrs":["10.96.0.0/12","10.112.0.0/12"]}: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64`}},
		{name: "replace the primary while adding", old: []string{"10.96.0.0/12"}, new: []string{"10.112.0.0/12", "fd00::/112"},
			want: []string{`spec.cidrs[0]: Invalid value: "10.112.0.0/12": field is immutable`}},
		{name: "remove one", old: []string{"10.96.0.0/12", "fd00::/112"}, new: []string{"10.96.0.0/12"},
			want: []string{`spec.cidrs: Invalid value: ["10.96.0.0/12"]: field is immutable`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateServiceCIDRUpdate(serviceCIDR(tc.new...), serviceCIDR(tc.old...)), tc.want)
		})
	}
}

func TestValidateServiceCIDRStatusUpdate(t *testing.T) {
	old := serviceCIDR("10.96.0.0/12")
	c := old.DeepCopy()
	c.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}
	checkErrors(t, ValidateServiceCIDRStatusUpdate(c, old), nil)
	c.Name = "other"
	checkErrors(t, ValidateServiceCIDRStatusUpdate(c, old), []string{`metadata.name: Invalid value: "other": field is immutable`})
}
