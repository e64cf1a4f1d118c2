package printers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigMaps returns the Table for core/v1 config maps (*corev1.ConfigMap and
// *corev1.ConfigMapList): Name, Data (the number of data and binaryData keys)
// and Age.
func ConfigMaps() *Table {
	return newTable("configmaps", []metav1.TableColumnDefinition{
		nameColumn(),
		column("Data", corev1.ConfigMap{}.SwaggerDoc()["data"]),
		ageColumn(),
	}, func(cm *corev1.ConfigMap, now time.Time) []interface{} {
		return []interface{}{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), age(cm.CreationTimestamp, now)}
	})
}
