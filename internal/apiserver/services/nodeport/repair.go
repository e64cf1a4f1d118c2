package nodeport

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/apiserver/services/repair"
	"github.com/kubeboot/kubeboot/internal/platform/network"
)

// Repair keeps the NodePort bitmap true to the Services: ports a Service
// holds that the bitmap lost are set again (Warning PortNotAllocated), ports
// that cannot be repaired (out of range, held twice) are reported as
// Warning Events on the Service, and ports no Service holds are freed once
// seen leaked on LeakSightings passes.
//
// Setting lost ports goes through the allocator's own compare-and-swap
// stream, so it lands even under constant allocation load. Freeing leaks
// (and migrating a changed --service-node-port-range) rewrites the bitmap
// by compare-and-swap against the bitmap read at the start of the pass:
// if anything was allocated or freed meanwhile, the free waits for a later
// pass rather than risk freeing a port that changed hands.
type Repair struct {
	rng      network.PortRange
	services repair.Lister
	alloc    *Allocator
	store    storage.Interface
	recorder record.EventRecorder
	leaks    map[int]int
}

// NewRepair returns a repair loop for the bitmap alloc keeps in store.
func NewRepair(alloc *Allocator, store storage.Interface, services repair.Lister, recorder record.EventRecorder) *Repair {
	return &Repair{rng: alloc.Range(), services: services, alloc: alloc, store: store, recorder: recorder, leaks: map[int]int{}}
}

// RunOnce is one repair pass.
func (r *Repair) RunOnce(ctx context.Context) error {
	start := time.Now()
	err := r.runOnce(ctx)
	repair.RepairDuration.WithLabelValues("nodeport").Observe(time.Since(start).Seconds())
	if err != nil {
		repair.NodePortRepairReconcileErrors.Inc()
	}
	return err
}

func (r *Repair) runOnce(ctx context.Context) error {
	// The bitmap first: a port allocated after this read, for a Service
	// listed below, looks lost here but is found set again when marking;
	// one allocated before, for a Service not yet stored, looks leaked
	// once, and is not freed.
	snapshot := &corev1.RangeAllocation{}
	if err := r.store.Get(ctx, Key, storage.GetOptions{IgnoreNotFound: true}, snapshot); err != nil {
		return fmt.Errorf("reading the node port bitmap: %w", err)
	}
	stored, migrate, err := r.storedPorts(snapshot)
	if err != nil {
		return err
	}
	svcObj, err := r.services.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Services: %w", err)
	}
	services := svcObj.(*corev1.ServiceList).Items

	held := map[int]*corev1.Service{}
	var lost []int
	for i := range services {
		svc := &services[i]
		for _, port := range heldPorts(svc) {
			switch {
			case !r.rng.Contains(port):
				r.warn(svc, repair.ReasonPortOutOfRange, "outOfRange", "Port %d is not within the port range %s; please recreate service", port, r.rng)
			case held[port] != nil:
				r.warn(svc, repair.ReasonPortAlreadyAllocated, "duplicate", "Port %d was assigned to multiple services; please recreate service", port)
			default:
				held[port] = svc
				if !stored[port] {
					lost = append(lost, port)
				}
			}
		}
	}
	if len(lost) > 0 && !migrate {
		marked, err := r.alloc.Mark(ctx, lost)
		if err != nil {
			return fmt.Errorf("repairing node ports: %w", err)
		}
		for _, port := range marked {
			r.warn(held[port], repair.ReasonPortNotAllocated, "repair", "Port %d is not allocated; repairing", port)
		}
	}

	// Ports stored but held by no Service.
	var free []int
	leakedNow := map[int]bool{}
	for port := range stored {
		if held[port] != nil {
			continue
		}
		if !r.rng.Contains(port) {
			free = append(free, port) // outside a changed range: nothing to keep
			continue
		}
		leakedNow[port] = true
		r.leaks[port]++
		if r.leaks[port] >= repair.LeakSightings {
			free = append(free, port)
		}
	}
	for port := range r.leaks {
		if !leakedNow[port] {
			delete(r.leaks, port)
		}
	}
	if len(free) == 0 && !migrate {
		r.updateGauges(stored, lost, nil)
		return nil
	}

	// Rewrite: the snapshot plus what Services hold, minus the leaks.
	rebuilt := decodeBitmap(nil, r.rng.Size)
	for port := range stored {
		if r.rng.Contains(port) {
			rebuilt.set(port - r.rng.Base)
		}
	}
	for port := range held {
		rebuilt.set(port - r.rng.Base)
	}
	for _, port := range free {
		if r.rng.Contains(port) {
			rebuilt.clear(port - r.rng.Base)
		}
	}
	next := snapshot.DeepCopy()
	next.Range = r.rng.String()
	next.Data = rebuilt.encode()
	err = r.store.GuaranteedUpdate(ctx, Key, &corev1.RangeAllocation{}, true, nil, storage.SimpleUpdate(func(cur runtime.Object) (runtime.Object, error) {
		if cur.(*corev1.RangeAllocation).ResourceVersion != snapshot.ResourceVersion {
			return nil, errChanged
		}
		return next, nil
	}), nil)
	if errors.Is(err, errChanged) {
		// Allocations moved on meanwhile; the leaks stay counted and are
		// freed by a pass that finds the bitmap quiet.
		klog.FromContext(ctx).V(2).Info("Node port bitmap changed during the repair pass; freeing leaks later", "ports", free)
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing the repaired node port bitmap: %w", err)
	}
	for _, port := range free {
		klog.FromContext(ctx).Info("Node port appears to have leaked: cleaning up", "port", port)
		repair.NodePortRepairErrors.WithLabelValues("leak").Inc()
		delete(r.leaks, port)
	}
	r.updateGauges(stored, lost, free)
	return nil
}

var errChanged = errors.New("node port bitmap changed during the repair pass")

func (r *Repair) updateGauges(stored map[int]bool, added, freed []int) {
	n := len(stored) + len(added) - len(freed)
	repair.NodePortAllocated.Set(float64(n))
	repair.NodePortAvailable.Set(float64(r.rng.Size - n))
}

// storedPorts decodes the stored bitmap into ports, under the range it was
// written with; migrate reports that it differs from the current flag.
func (r *Repair) storedPorts(ra *corev1.RangeAllocation) (ports map[int]bool, migrate bool, err error) {
	rng := r.rng
	if ra.Range != "" && ra.Range != r.rng.String() {
		old, err := network.ParsePortRange(ra.Range)
		if err != nil {
			return nil, false, fmt.Errorf("stored node port range %q: %w", ra.Range, err)
		}
		klog.Background().Info("Node port range changed; migrating allocations", "from", ra.Range, "to", r.rng)
		rng = old
		migrate = true
	}
	bm := decodeBitmap(ra.Data, rng.Size)
	out := map[int]bool{}
	for off := 0; off < rng.Size; off++ {
		if bm.has(off) {
			out[rng.Base+off] = true
		}
	}
	return out, migrate, nil
}

func (r *Repair) warn(svc *corev1.Service, reason, metric, format string, args ...any) {
	r.recorder.Eventf(svc, corev1.EventTypeWarning, reason, format, args...)
	repair.NodePortRepairErrors.WithLabelValues(metric).Inc()
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
