package printers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Secrets returns the Table for core/v1 secrets (*corev1.Secret and
// *corev1.SecretList): Name, Type, Data (the number of data keys) and Age.
func Secrets() *Table {
	doc := corev1.Secret{}.SwaggerDoc()
	return newTable("secrets", []metav1.TableColumnDefinition{
		nameColumn(),
		column("Type", doc["type"]),
		column("Data", doc["data"]),
		ageColumn(),
	}, func(s *corev1.Secret, now time.Time) []interface{} {
		return []interface{}{s.Name, string(s.Type), secretKeys(s), age(s.CreationTimestamp, now)}
	})
}

// secretKeys counts the secret's data keys. kube-apiserver folds stringData
// into data before storing, so stringData keys not yet folded in are counted
// too; the result is the same either way.
func secretKeys(s *corev1.Secret) int64 {
	n := len(s.Data)
	for k := range s.StringData {
		if _, dup := s.Data[k]; !dup {
			n++
		}
	}
	return int64(n)
}
