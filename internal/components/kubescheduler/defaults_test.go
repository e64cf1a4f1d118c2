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
