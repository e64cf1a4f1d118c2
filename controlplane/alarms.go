package controlplane

import (
	"context"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/platform/etcd"
)

// etcdAlarmInterval is how often the server looks at its embedded etcd's
// space and alarms: all of it is read in the process, nothing is sent.
const etcdAlarmInterval = time.Second

// etcdAlarmsCheck is /readyz's etcd-alarms check: an active alarm of the
// embedded etcd (NOSPACE: the cluster refuses writes) makes the server
// not ready, naming the alarm. kube-apiserver has no such check: its
// etcd check reads, which a NOSPACE cluster still answers.
func (s *Server) etcdAlarmsCheck() healthz.HealthChecker {
	return healthz.NamedCheck("etcd-alarms", func(*http.Request) error {
		select {
		case <-s.etcdStarted:
		default:
			return nil // the etcd check waits for it
		}
		if s.etcd == nil {
			return nil
		}
		return s.etcd.CheckAlarms()
	})
}

// spaceLowShare is the share of the quota past which the server warns
// that the embedded etcd is filling up.
const spaceLowShare = 0.8

// reclaimEtcdSpace watches the embedded etcd's space and alarms, and
// clears this member's NOSPACE alarm once there is room again
// (etcd.Server.ReclaimSpace): deleting objects is all a user has to do. It records Events on this server's identity Lease
// (kube-system/apiserver-<id>): a Warning when the database passes
// spaceLowShare of its quota, and a Normal one when an alarm is cleared.
// While NOSPACE is raised no Event can be written (etcd refuses every
// write), so that alarm is logged and fails /readyz instead.
func (s *Server) reclaimEtcdSpace(ctx context.Context) {
	if s.etcd == nil {
		return
	}
	logger := klog.FromContext(ctx)
	identity := s.identityLease()
	recorder := s.api.Recorder()
	raised := map[etcd.Alarm]time.Time{}
	warned := false
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		// Alarms are noted before the reclaim, which may clear them in
		// the same tick: each cleared one then still gets its Event.
		for _, a := range s.etcd.Alarms() {
			if _, ok := raised[a]; !ok {
				raised[a] = time.Now()
				logger.Error(nil, "The embedded etcd raised an alarm", "alarm", a.String(), "err", s.etcd.CheckAlarms())
			}
		}
		if cleared, err := s.etcd.ReclaimSpace(ctx); err != nil {
			logger.Error(err, "Clearing the embedded etcd's NOSPACE alarm")
		} else if cleared {
			size, inUse := s.etcd.Space()
			logger.Info("Cleared the embedded etcd's NOSPACE alarm: compaction made room", "bytes", size, "inUse", inUse, "quota", s.etcd.Quota())
		}
		size, _ := s.etcd.Space()
		quota := s.etcd.Quota()
		// The database's size shrinks only when it is defragmented, so
		// the warning does not flap.
		low := float64(size) >= spaceLowShare*float64(quota)
		if low && !warned {
			recorder.Eventf(identity, corev1.EventTypeWarning, "EtcdSpaceLow",
				"The embedded etcd's database holds %d of its %d bytes (--etcd-quota-backend-bytes); past the quota it refuses writes until objects are deleted", size, quota)
		}
		warned = low
		now := s.etcd.Alarms()
		for a, since := range raised {
			if !slices.Contains(now, a) {
				recorder.Eventf(identity, corev1.EventTypeNormal, "EtcdAlarmCleared", "The embedded etcd's alarm %s, raised at %s, is cleared",
					a, since.UTC().Format(time.RFC3339))
				delete(raised, a)
			}
		}
	}, etcdAlarmInterval)
}
