package printers

import (
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceCIDRs returns the Table for networking.k8s.io/v1 service CIDRs
// (*networkingv1.ServiceCIDR and *networkingv1.ServiceCIDRList): Name, CIDRs
// (comma-joined) and Age.
func ServiceCIDRs() *Table {
	return newTable("servicecidrs", []metav1.TableColumnDefinition{
		nameColumn(),
		column("CIDRs", docAsIn136(networkingv1.ServiceCIDRSpec{}.SwaggerDoc(), "cidrs", "CIDRs")),
		ageColumn(),
	}, func(c *networkingv1.ServiceCIDR, now time.Time) []interface{} {
		return []interface{}{c.Name, strings.Join(c.Spec.CIDRs, ","), age(c.CreationTimestamp, now)}
	})
}
