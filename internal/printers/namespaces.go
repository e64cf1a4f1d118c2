package printers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Namespaces returns the Table for core/v1 namespaces (*corev1.Namespace and
// *corev1.NamespaceList): Name, Status (the phase) and Age.
func Namespaces() *Table {
	return newTable("namespaces", []metav1.TableColumnDefinition{
		nameColumn(),
		column("Status", "The status of the namespace"),
		ageColumn(),
	}, func(ns *corev1.Namespace, now time.Time) []interface{} {
		return []interface{}{ns.Name, string(ns.Status.Phase), age(ns.CreationTimestamp, now)}
	})
}
