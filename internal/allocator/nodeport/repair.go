package nodeport

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/allocator"
	"github.com/kubeboot/kubeboot/internal/network"
)

// Repair rebuilds the NodePort bitmap from the Services: ports a Service
// holds are marked allocated (Warning PortNotAllocated when they were
// not), ports that cannot be repaired (out of range, held twice) are
// reported as Warning Events on the Service, and ports no Service holds are
// freed once seen leaked on LeakSightings passes. The new bitmap is written
// by compare-and-swap against the one read at the start of the pass, so an
// allocation committed meanwhile makes the pass retry instead of being
// lost. A range changed by --service-node-port-range is migrated here.
type Repair struct {
	rng      network.PortRange
	services allocator.Lister
	store    storage.Interface
	recorder record.EventRecorder
	leaks    map[int]int
}

// NewRepair returns a repair loop over the bitmap in store.
func NewRepair(rng network.PortRange, services allocator.Lister, store storage.Interface, recorder record.EventRecorder) *Repair {
	return &Repair{rng: rng, services: services, store: store, recorder: recorder, leaks: map[int]int{}}
}

// RunOnce is one repair pass.
func (r *Repair) RunOnce(ctx context.Context) error {
	start := time.Now()
	err := r.runOnce(ctx)
	allocator.RepairDuration.WithLabelValues("nodeport").Observe(time.Since(start).Seconds())
	if err != nil {
		allocator.NodePortRepairReconcileErrors.Inc()
	}
	return err
}

func (r *Repair) runOnce(ctx context.Context) error {
	// The bitmap first: a port allocated after this read, for a Service
	// listed below, makes the final compare-and-swap fail and the pass
	// retry; one allocated before, for a Service not yet stored, is a leak
	// seen once, not freed.
	snapshot := &corev1.RangeAllocation{}
	if err := r.store.Get(ctx, Key, storage.GetOptions{IgnoreNotFound: true}, snapshot); err != nil {
		return fmt.Errorf("reading the node port bitmap: %w", err)
	}
	stored, err := r.storedPorts(snapshot)
	if err != nil {
		return err
	}
	svcObj, err := r.services.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Services: %w", err)
	}
	services := svcObj.(*corev1.ServiceList).Items

	rebuilt := decodeBitmap(nil, r.rng.Size)
	for i := range services {
		svc := &services[i]
		for _, port := range heldPorts(svc) {
			switch {
			case !r.rng.Contains(port):
				r.warn(svc, allocator.ReasonPortOutOfRange, "outOfRange", "Port %d is not within the port range %s; please recreate service", port, r.rng)
			case rebuilt.has(port - r.rng.Base):
				r.warn(svc, allocator.ReasonPortAlreadyAllocated, "duplicate", "Port %d was assigned to multiple services; please recreate service", port)
			default:
				rebuilt.set(port - r.rng.Base)
				if !stored[port] {
					r.warn(svc, allocator.ReasonPortNotAllocated, "repair", "Port %d is not allocated; repairing", port)
				}
			}
		}
	}

	// Ports stored but held by no Service.
	leakedNow := map[int]bool{}
	for port := range stored {
		if !r.rng.Contains(port) || rebuilt.has(port-r.rng.Base) {
			continue
		}
		leakedNow[port] = true
		r.leaks[port]++
		if r.leaks[port] < allocator.LeakSightings {
			rebuilt.set(port - r.rng.Base) // maybe a create in flight: keep it for now
			continue
		}
		klog.FromContext(ctx).Info("Node port appears to have leaked: cleaning up", "port", port)
		allocator.NodePortRepairErrors.WithLabelValues("leak").Inc()
	}

	next := snapshot.DeepCopy()
	next.Range = r.rng.String()
	next.Data = rebuilt.encode()
	rv := snapshot.ResourceVersion
	var preconditions *storage.Preconditions
	if rv != "" {
		preconditions = &storage.Preconditions{ResourceVersion: &rv}
	}
	out := &corev1.RangeAllocation{}
	err = r.store.GuaranteedUpdate(ctx, Key, out, true, preconditions, storage.SimpleUpdate(func(cur runtime.Object) (runtime.Object, error) {
		if rv == "" && cur.(*corev1.RangeAllocation).ResourceVersion != "" {
			// Created meanwhile: start over with what is there now.
			return nil, fmt.Errorf("node port bitmap created during the repair pass")
		}
		return next, nil
	}), nil)
	if err != nil {
		return fmt.Errorf("writing the repaired node port bitmap (will retry): %w", err)
	}
	for port := range r.leaks {
		if !leakedNow[port] || r.leaks[port] >= allocator.LeakSightings {
			delete(r.leaks, port)
		}
	}
	n := rebuilt.count()
	allocator.NodePortAllocated.Set(float64(n))
	allocator.NodePortAvailable.Set(float64(r.rng.Size - n))
	return nil
}

// storedPorts decodes the stored bitmap into ports, under the range it was
// written with (which may differ from the current flag).
func (r *Repair) storedPorts(ra *corev1.RangeAllocation) (map[int]bool, error) {
	rng := r.rng
	if ra.Range != "" && ra.Range != r.rng.String() {
		old, err := network.ParsePortRange(ra.Range)
		if err != nil {
			return nil, fmt.Errorf("stored node port range %q: %w", ra.Range, err)
		}
		klog.Background().Info("Node port range changed; migrating allocations", "from", ra.Range, "to", r.rng)
		rng = old
	}
	bm := decodeBitmap(ra.Data, rng.Size)
	out := map[int]bool{}
	for off := 0; off < rng.Size; off++ {
		if bm.has(off) {
			out[rng.Base+off] = true
		}
	}
	return out, nil
}

func (r *Repair) warn(svc *corev1.Service, reason, metric, format string, args ...any) {
	r.recorder.Eventf(svc, corev1.EventTypeWarning, reason, format, args...)
	allocator.NodePortRepairErrors.WithLabelValues(metric).Inc()
}

// heldPorts lists the node ports of a Service, the health check port
// included, each once.
func heldPorts(svc *corev1.Service) []int {
	seen := map[int]bool{}
	var out []int
	add := func(p int32) {
		if p != 0 && !seen[int(p)] {
			seen[int(p)] = true
			out = append(out, int(p))
		}
	}
	for _, p := range svc.Spec.Ports {
		add(p.NodePort)
	}
	add(svc.Spec.HealthCheckNodePort)
	return out
}
