package apiserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/allocator/clusterip"
	"github.com/kubeboot/kubeboot/internal/allocator/nodeport"
)

// Defaults of the repair loops, as kube-apiserver's.
const (
	DefaultRepairInterval = 3 * time.Minute
	DefaultRepairDeadline = time.Minute
)

// repairs runs the ClusterIP and NodePort repair loops.
type repairs struct {
	clusterIP *clusterip.Repair
	nodePort  *nodeport.Repair
	interval  time.Duration
	deadline  time.Duration
}

func (s *Server) newRepairs(cfg Config, recorder record.EventRecorder) *repairs {
	var ranges []clusterip.Range
	for _, a := range s.alloc.clusterIP {
		ranges = append(ranges, a.Range())
	}
	r := &repairs{
		clusterIP: clusterip.NewRepair(ranges, s.services, s.ipAddresses, recorder),
		nodePort:  nodeport.NewRepair(s.alloc.nodePorts, s.alloc.nodePortStore, s.services, recorder),
		interval:  cfg.RepairInterval,
		deadline:  cfg.RepairDeadline,
	}
	if r.interval <= 0 {
		r.interval = DefaultRepairInterval
	}
	if r.deadline <= 0 {
		r.deadline = DefaultRepairDeadline
	}
	return r
}

// start runs the first passes, retrying until both succeeded: until then
// the hook, and so /readyz, is not done. If they cannot succeed within the
// deadline, the error ends the process. Then the loops run every interval.
func (r *repairs) start(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	var lastErr error
	first := []func(context.Context) error{r.clusterIP.RunOnce, r.nodePort.RunOnce}
	pending := first
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, r.deadline, true, func(ctx context.Context) (bool, error) {
		var failed []func(context.Context) error
		var errs []error
		for _, pass := range pending {
			if err := pass(ctx); err != nil {
				failed = append(failed, pass)
				errs = append(errs, err)
			}
		}
		pending, lastErr = failed, errors.Join(errs...)
		if lastErr != nil {
			logger.V(2).Info("First Service IP and NodePort repair passes failed, will retry", "err", lastErr)
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("the first Service ClusterIP and NodePort repair passes did not succeed within %s: %v", r.deadline, lastErr)
	}
	for _, loop := range []struct {
		name string
		pass func(context.Context) error
	}{{"ClusterIP", r.clusterIP.RunOnce}, {"NodePort", r.nodePort.RunOnce}} {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			if err := loop.pass(ctx); err != nil {
				logger.Error(err, "Repair pass failed", "allocator", loop.name)
			}
		}, r.interval)
	}
	return nil
}
