package printers

import (
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// IPAddresses returns the Table for networking.k8s.io/v1 IP addresses
// (*networkingv1.IPAddress and *networkingv1.IPAddressList): Name and
// ParentRef ("services/<namespace>/<name>").
//
// Like kube-apiserver 1.36, each row carries a third cell, the age, that has
// no column definition; kubectl prints only the defined columns.
func IPAddresses() *Table {
	return newTable("ipaddresses", []metav1.TableColumnDefinition{
		nameColumn(),
		column("ParentRef", docAsIn136(networkingv1.IPAddressSpec{}.SwaggerDoc(), "parentRef", "ParentRef")),
	}, func(ip *networkingv1.IPAddress, now time.Time) []interface{} {
		return []interface{}{ip.Name, parentRef(ip.Spec.ParentRef), age(ip.CreationTimestamp, now)}
	})
}

// parentRef renders "resource[.group][/namespace]/name" in lower case, or
// "<none>" without a parent.
func parentRef(ref *networkingv1.ParentReference) string {
	if ref == nil {
		return "<none>"
	}
	s := strings.ToLower(schema.GroupResource{Group: ref.Group, Resource: ref.Resource}.String())
	if ref.Namespace != "" {
		s += "/" + ref.Namespace
	}
	return s + "/" + ref.Name
}
