package app

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestMemoryLimit(t *testing.T) {
	const total = 24 << 30
	for _, tc := range []struct {
		name      string
		args      []string
		env       string // GOMEMLIMIT
		total     uint64
		want      int64
		wantError string
	}{
		{name: "default: 75% of the machine", total: total, want: 18 << 30},
		{name: "a size", args: []string{"--memory-limit=10Gi"}, total: total, want: 10 << 30},
		{name: "a decimal size", args: []string{"--memory-limit=9500M"}, total: total, want: 9500e6},
		{name: "a percentage", args: []string{"--memory-limit=50%"}, total: total, want: 12 << 30},
		{name: "none", args: []string{"--memory-limit=0"}, total: total, want: math.MaxInt64},
		{name: "GOMEMLIMIT when the flag is not given", env: "3GiB", total: total, want: 3 << 30},
		{name: "the flag over GOMEMLIMIT", args: []string{"--memory-limit=4Gi"}, env: "3GiB", total: total, want: 4 << 30},
		{name: "a size where memory is unknown", args: []string{"--memory-limit=4Gi"}, want: 4 << 30},
		{name: "a percentage where memory is unknown", args: []string{"--memory-limit=75%"}, wantError: "--memory-limit \"75%\": this machine's memory cannot be read"},
		{name: "not a size", args: []string{"--memory-limit=lots"}, total: total, wantError: "--memory-limit \"lots\": want a size such as 8Gi or a percentage such as 75%"},
		{name: "above 100%", args: []string{"--memory-limit=150%"}, total: total, wantError: "--memory-limit \"150%\": a percentage must be above 0 and at most 100"},
		{name: "0%", args: []string{"--memory-limit=0%"}, total: total, wantError: "a percentage must be above 0"},
		{name: "negative", args: []string{"--memory-limit=-1Gi"}, total: total, wantError: "--memory-limit \"-1Gi\": a size must not be negative"},
		{name: "too small to start", args: []string{"--memory-limit=64Mi"}, total: total, wantError: "--memory-limit \"64Mi\": at least 256Mi, or 0 for no limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				// The runtime reads GOMEMLIMIT at start; memoryLimit then reads
				// the runtime's limit.
				t.Setenv("GOMEMLIMIT", tc.env)
				defer debug.SetMemoryLimit(debug.SetMemoryLimit(3 << 30))
			}
			cmd := &cobra.Command{Use: "server", RunE: func(*cobra.Command, []string) error { return nil }}
			addMemoryFlags(cmd)
			if err := cmd.Flags().Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			got, err := memoryLimit(cmd.Flags(), tc.total)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("memoryLimit() error %v, want one with %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("memoryLimit() = %d, want %d", got, tc.want)
			}
		})
	}
}
