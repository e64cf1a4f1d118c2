package printers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceAccounts returns the Table for core/v1 service accounts
// (*corev1.ServiceAccount and *corev1.ServiceAccountList): Name and Age.
// kube-apiserver 1.36 no longer prints a Secrets column.
func ServiceAccounts() *Table {
	return newTable("serviceaccounts", []metav1.TableColumnDefinition{
		nameColumn(),
		ageColumn(),
	}, func(sa *corev1.ServiceAccount, now time.Time) []interface{} {
		return []interface{}{sa.Name, age(sa.CreationTimestamp, now)}
	})
}
