package repair

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of both allocators and both repair loops, named as
// kube-apiserver's. They live in the process-wide legacy registry served
// at /metrics; several servers in one process (tests) share them.
var (
	// ClusterIPAllocated and ClusterIPAvailable count IPs by ServiceCIDR
	// range ("cidr"), from the IPAddress objects the allocator's informer
	// has.
	ClusterIPAllocated = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "kube_apiserver", Subsystem: "clusterip_allocator", Name: "allocated_ips",
		Help: "Gauge measuring the number of allocated IPs for Services", StabilityLevel: metrics.ALPHA,
	}, []string{"cidr"})
	ClusterIPAvailable = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "kube_apiserver", Subsystem: "clusterip_allocator", Name: "available_ips",
		Help: "Gauge measuring the number of available IPs for Services", StabilityLevel: metrics.ALPHA,
	}, []string{"cidr"})
	// ClusterIPAllocations and ClusterIPAllocationErrors count by range
	// and scope ("static": requested, "dynamic"); an allocation counts once
	// its IPAddress is stored.
	ClusterIPAllocations = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kube_apiserver", Subsystem: "clusterip_allocator", Name: "allocation_total",
		Help: "Number of Cluster IPs allocations", StabilityLevel: metrics.ALPHA,
	}, []string{"cidr", "scope"})
	ClusterIPAllocationErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kube_apiserver", Subsystem: "clusterip_allocator", Name: "allocation_errors_total",
		Help: "Number of errors trying to allocate Cluster IPs", StabilityLevel: metrics.ALPHA,
	}, []string{"cidr", "scope"})
	// ClusterIPAllocationDuration times an allocation from the choice of
	// the IP until its IPAddress is stored.
	ClusterIPAllocationDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "kube_apiserver", Subsystem: "clusterip_allocator", Name: "allocation_duration_seconds",
		Help: "Duration in seconds to allocate a Cluster IP by ServiceCIDR", Buckets: metrics.DefBuckets, StabilityLevel: metrics.ALPHA,
	}, []string{"cidr"})

	// NodePortAllocated and NodePortAvailable count ports, refreshed by
	// every committed write.
	NodePortAllocated = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "kube_apiserver", Subsystem: "nodeport_allocator", Name: "allocated_ports",
		Help: "Gauge measuring the number of allocated NodePorts for Services", StabilityLevel: metrics.ALPHA,
	})
	NodePortAvailable = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "kube_apiserver", Subsystem: "nodeport_allocator", Name: "available_ports",
		Help: "Gauge measuring the number of available NodePorts for Services", StabilityLevel: metrics.ALPHA,
	})
	NodePortAllocations = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kube_apiserver", Subsystem: "nodeport_allocator", Name: "allocation_total",
		Help: "Number of NodePort allocations", StabilityLevel: metrics.ALPHA,
	}, []string{"scope"})
	NodePortAllocationErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "kube_apiserver", Subsystem: "nodeport_allocator", Name: "allocation_errors_total",
		Help: "Number of errors trying to allocate NodePort", StabilityLevel: metrics.ALPHA,
	}, []string{"scope"})

	// ClusterIPRepairErrors and NodePortRepairErrors count what the repair
	// loops found, by type: leak, repair, full, outOfRange, duplicate,
	// invalid, unknown.
	ClusterIPRepairErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "apiserver", Subsystem: "clusterip_repair", Name: "ip_errors_total",
		Help: "Number of errors detected on clusterips by the repair loop broken down by type of error: leak, repair, full, outOfRange, duplicate, unknown, invalid", StabilityLevel: metrics.ALPHA,
	}, []string{"type"})
	ClusterIPRepairReconcileErrors = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "apiserver", Subsystem: "clusterip_repair", Name: "reconcile_errors_total",
		Help: "Number of reconciliation failures on the clusterip repair reconcile loop", StabilityLevel: metrics.ALPHA,
	})
	NodePortRepairErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "apiserver", Subsystem: "nodeport_repair", Name: "port_errors_total",
		Help: "Number of errors detected on ports by the repair loop broken down by type of error: leak, repair, full, outOfRange, duplicate, unknown", StabilityLevel: metrics.ALPHA,
	}, []string{"type"})
	NodePortRepairReconcileErrors = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "apiserver", Subsystem: "nodeport_repair", Name: "reconcile_errors_total",
		Help: "Number of reconciliation failures on the nodeport repair reconcile loop", StabilityLevel: metrics.ALPHA,
	})
)

// RepairDuration times repair passes by allocator ("clusterip", "nodeport"). Not a kube-apiserver metric: kubeboot's repair must stay
// fast with many Services, and this shows it.
var RepairDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
	Namespace: "kubeboot", Subsystem: "service_repair", Name: "duration_seconds",
	Help:           "Duration in seconds of one repair pass over all Services, by allocator",
	Buckets:        []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	StabilityLevel: metrics.ALPHA,
}, []string{"allocator"})

var registerOnce sync.Once

// RegisterMetrics adds the metrics to the legacy registry, once per process.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(
			ClusterIPAllocated, ClusterIPAvailable, ClusterIPAllocations, ClusterIPAllocationErrors, ClusterIPAllocationDuration,
			NodePortAllocated, NodePortAvailable, NodePortAllocations, NodePortAllocationErrors,
			ClusterIPRepairErrors, ClusterIPRepairReconcileErrors,
			NodePortRepairErrors, NodePortRepairReconcileErrors,
			RepairDuration,
		)
	})
}
