package options

import (
	"testing"

	"github.com/spf13/pflag"
)

// TestDefaultAudit: audit is on unless --audit-policy-file or
// --audit-log-path is given empty; giving them a value keeps it on for
// the other one.
func TestDefaultAudit(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--audit-policy-file="}, false},
		{[]string{"--audit-log-path="}, false},
		{[]string{"--audit-log-path=/var/log/kubeboot/audit.log"}, true},
		{[]string{"--audit-policy-file=/etc/kubeboot/audit.yaml"}, true},
		{[]string{"--audit-log-maxage=7"}, true},
	} {
		o := NewAPIServer()
		fs := pflag.NewFlagSet("apiserver", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := o.Config().DefaultAudit; got != tc.want {
			t.Errorf("%v: DefaultAudit %v, want %v", tc.args, got, tc.want)
		}
	}
}
