package kubescheduler

import (
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/internal/components/election"
)

// TestRetryPeriod: the scheduler's election retries every
// election.DefaultRetryPeriod unless its --leader-elect-retry-period says
// otherwise.
func TestRetryPeriod(t *testing.T) {
	for _, tc := range []struct {
		flag string
		want time.Duration
	}{
		{"", election.DefaultRetryPeriod},
		{"2s", 2 * time.Second},
	} {
		opts := NewOptions()
		if tc.flag != "" {
			if err := opts.Flags.FlagSet("leader election").Set("leader-elect-retry-period", tc.flag); err != nil {
				t.Fatal(err)
			}
		}
		o, err := withDefaults(opts, false)
		if err != nil {
			t.Fatal(err)
		}
		o.ApplyLeaderElectionTo(o.ComponentConfig)
		if got := o.ComponentConfig.LeaderElection.RetryPeriod.Duration; got != tc.want {
			t.Errorf("--leader-elect-retry-period=%q: retry period %v, want %v", tc.flag, got, tc.want)
		}
	}
}

// TestClientLimits: the scheduler's clients get InProcessQPS and
// InProcessBurst unless its --kube-api-qps and --kube-api-burst say
// otherwise.
func TestClientLimits(t *testing.T) {
	for _, tc := range []struct {
		flags map[string]string
		qps   float32
		burst int32
	}{
		{nil, InProcessQPS, InProcessBurst},
		{map[string]string{"kube-api-qps": "30"}, 30, InProcessBurst},
		{map[string]string{"kube-api-qps": "30", "kube-api-burst": "60"}, 30, 60},
	} {
		opts := NewOptions()
		for name, value := range tc.flags {
			if err := opts.Flags.FlagSet("deprecated").Set(name, value); err != nil {
				t.Fatal(err)
			}
		}
		o, err := withDefaults(opts, false)
		if err != nil {
			t.Fatal(err)
		}
		o.ApplyDeprecated()
		if got := o.ComponentConfig.ClientConnection; got.QPS != tc.qps || got.Burst != tc.burst {
			t.Errorf("flags %v: QPS %v, burst %d; want %v, %d", tc.flags, got.QPS, got.Burst, tc.qps, tc.burst)
		}
	}
}
