package printers

import (
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxListed is how many addresses or ports a cell lists before it summarises
// the rest as " + N more...".
const maxListed = 3

// Endpoints returns the Table for core/v1 endpoints (*corev1.Endpoints and
// *corev1.EndpointsList): Name, Endpoints and Age.
func Endpoints() *Table {
	return newTable("endpoints", []metav1.TableColumnDefinition{
		nameColumn(),
		column("Endpoints", corev1.Endpoints{}.SwaggerDoc()["subsets"]),
		ageColumn(),
	}, func(ep *corev1.Endpoints, now time.Time) []interface{} {
		return []interface{}{ep.Name, formatEndpoints(ep), age(ep.CreationTimestamp, now)}
	})
}

// formatEndpoints lists the ready addresses as "ip:port" (or bare IPs for a
// subset without ports), showing at most maxListed of them. An object with no
// subsets prints "<none>"; one whose subsets hold only not-ready addresses
// prints an empty cell, as kube-apiserver does.
func formatEndpoints(ep *corev1.Endpoints) string {
	if len(ep.Subsets) == 0 {
		return "<none>"
	}
	var list []string
	total := 0
	add := func(s string) {
		if len(list) < maxListed {
			list = append(list, s)
		}
		total++
	}
	for _, ss := range ep.Subsets {
		if len(ss.Ports) == 0 {
			// Headless services may have no ports.
			for _, addr := range ss.Addresses {
				add(addr.IP)
			}
			continue
		}
		for _, port := range ss.Ports {
			for _, addr := range ss.Addresses {
				add(net.JoinHostPort(addr.IP, strconv.Itoa(int(port.Port))))
			}
		}
	}
	return joinWithMore(list, total, maxListed)
}
