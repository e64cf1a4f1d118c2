package validation

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func lease(mutate func(*coordinationv1.Lease)) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager", Namespace: "kube-system", ResourceVersion: "1"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr("node-1_7f3c"),
			LeaseDurationSeconds: ptr(int32(15)),
			AcquireTime:          &metav1.MicroTime{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
			RenewTime:            &metav1.MicroTime{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
			LeaseTransitions:     ptr(int32(0)),
		},
	}
	if mutate != nil {
		mutate(l)
	}
	return l
}

func TestValidateLease(t *testing.T) {
	tests := []struct {
		name  string
		lease *coordinationv1.Lease
		want  []string
	}{
		{name: "leader election lease", lease: lease(nil)},
		{name: "node heartbeat (subdomain name)", lease: lease(func(l *coordinationv1.Lease) { l.Name, l.Namespace = "node-1.example.com", "kube-node-lease" })},
		{name: "coordinated strategy with preferred holder", lease: lease(func(l *coordinationv1.Lease) {
			l.Spec.Strategy, l.Spec.PreferredHolder = ptr(coordinationv1.OldestEmulationVersion), ptr("node-2")
		})},
		{name: "custom strategy", lease: lease(func(l *coordinationv1.Lease) {
			l.Spec.Strategy = ptr(coordinationv1.CoordinatedLeaseStrategy("example.com/newest"))
		})},
		{name: "bad durations", lease: lease(func(l *coordinationv1.Lease) {
			l.Spec.LeaseDurationSeconds, l.Spec.LeaseTransitions = ptr(int32(0)), ptr(int32(-1))
		}), want: []string{
			`spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0`,
			`spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0`,
		}},
		// kube-apiserver reports the strategy at spec.strategy.strategy.
		{name: "unknown strategy", lease: lease(func(l *coordinationv1.Lease) {
			l.Spec.Strategy = ptr(coordinationv1.CoordinatedLeaseStrategy("Newest"))
		}),
			want: []string{`spec.strategy.strategy: Unsupported value: "Newest": supported values: "OldestEmulationVersion"`}},
		{name: "preferred holder without strategy", lease: lease(func(l *coordinationv1.Lease) { l.Spec.PreferredHolder = ptr("node-2") }),
			want: []string{"spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined"}},
		{name: "invalid name", lease: lease(func(l *coordinationv1.Lease) { l.Name = "KCM" }),
			want: []string{`metadata.name: Invalid value: "KCM": ` + dns1123SubdomainMsg}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateLease(tc.lease), tc.want)
		})
	}
}

func TestValidateLeaseUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*coordinationv1.Lease)
		want   []string
	}{
		{name: "renew", mutate: func(l *coordinationv1.Lease) {
			l.Spec.RenewTime = &metav1.MicroTime{Time: l.Spec.RenewTime.Add(10 * time.Second)}
		}},
		{name: "take over", mutate: func(l *coordinationv1.Lease) {
			l.Spec.HolderIdentity, l.Spec.LeaseTransitions = ptr("node-2_a1b2"), ptr(int32(1))
		}},
		{name: "negative transitions", mutate: func(l *coordinationv1.Lease) { l.Spec.LeaseTransitions = ptr(int32(-1)) },
			want: []string{`spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := lease(nil)
			l := old.DeepCopy()
			tc.mutate(l)
			checkErrors(t, ValidateLeaseUpdate(l, old), tc.want)
		})
	}
}
