package printers

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Leases returns the Table for coordination.k8s.io/v1 leases
// (*coordinationv1.Lease and *coordinationv1.LeaseList): Name, Holder and Age.
func Leases() *Table {
	return newTable("leases", []metav1.TableColumnDefinition{
		nameColumn(),
		column("Holder", coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]),
		ageColumn(),
	}, func(l *coordinationv1.Lease, now time.Time) []interface{} {
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		return []interface{}{l.Name, holder, age(l.CreationTimestamp, now)}
	})
}
