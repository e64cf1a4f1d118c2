package printers

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Services returns the Table for core/v1 services (*corev1.Service and
// *corev1.ServiceList): Name, Type, Cluster-IP, External-IP, Port(s), Age and
// the wide Selector column.
func Services() *Table {
	spec := corev1.ServiceSpec{}.SwaggerDoc()
	return newTable("services", []metav1.TableColumnDefinition{
		nameColumn(),
		column("Type", spec["type"]),
		column("Cluster-IP", spec["clusterIP"]),
		column("External-IP", spec["externalIPs"]),
		column("Port(s)", spec["ports"]),
		ageColumn(),
		wideColumn("Selector", spec["selector"]),
	}, func(svc *corev1.Service, now time.Time) []interface{} {
		return []interface{}{
			svc.Name,
			string(svc.Spec.Type),
			serviceClusterIP(svc),
			serviceExternalIP(svc),
			orNone(servicePorts(svc.Spec.Ports)),
			age(svc.CreationTimestamp, now),
			labels.FormatLabels(svc.Spec.Selector),
		}
	})
}

// serviceClusterIP is the primary cluster IP ("None" for headless services),
// or "<none>" when the service has none (ExternalName).
func serviceClusterIP(svc *corev1.Service) string {
	if len(svc.Spec.ClusterIPs) > 0 {
		return svc.Spec.ClusterIPs[0]
	}
	// A defaulted service always mirrors clusterIP into clusterIPs; fall back
	// for objects that were stored without it.
	return orNone(svc.Spec.ClusterIP)
}

// serviceExternalIP lists the addresses the service is reachable on from
// outside the cluster.
func serviceExternalIP(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		return orNone(strings.Join(svc.Spec.ExternalIPs, ","))
	case corev1.ServiceTypeLoadBalancer:
		ips := loadBalancerIngress(svc.Status.LoadBalancer)
		ips = append(ips, svc.Spec.ExternalIPs...)
		if len(ips) == 0 {
			return "<pending>"
		}
		return strings.Join(ips, ",")
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

// loadBalancerIngress returns the distinct, sorted ingress points of a load
// balancer: each entry's IP, or its hostname when it has no IP.
func loadBalancerIngress(status corev1.LoadBalancerStatus) []string {
	var points []string
	for _, ing := range status.Ingress {
		switch {
		case ing.IP != "":
			points = append(points, ing.IP)
		case ing.Hostname != "":
			points = append(points, ing.Hostname)
		}
	}
	slices.Sort(points)
	return slices.Compact(points)
}

// servicePorts renders ports as "80/TCP", or "80:31715/TCP" when a node port
// is allocated, joined by commas.
func servicePorts(ports []corev1.ServicePort) string {
	pieces := make([]string, 0, len(ports))
	for _, p := range ports {
		if p.NodePort > 0 {
			pieces = append(pieces, fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol))
		} else {
			pieces = append(pieces, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
		}
	}
	return strings.Join(pieces, ",")
}
