package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// checkErrors fails the test unless errs renders, in order, exactly as want
// (each entry the err.Error() of one field.Error).
func checkErrors(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	got := make([]string, len(errs))
	for i, err := range errs {
		got[i] = err.Error()
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors mismatch\n got (%d):\n  %s\nwant (%d):\n  %s",
			len(got), strings.Join(got, "\n  "), len(want), strings.Join(want, "\n  "))
	}
}

func ptr[T any](v T) *T { return &v }

// Messages of apimachinery's name checks, used across the tests.
const (
	dns1123LabelMsg     = `a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`
	dns1123SubdomainMsg = `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`
)

func TestValidateKubeFinalizerName(t *testing.T) {
	tests := []struct {
		name      string
		finalizer string
		want      []string
	}{
		{name: "standard kubernetes", finalizer: "kubernetes"},
		{name: "standard orphan", finalizer: "orphan"},
		{name: "standard foregroundDeletion", finalizer: "foregroundDeletion"},
		{name: "domain qualified", finalizer: "example.com/cleanup"},
		{name: "unqualified custom", finalizer: "cleanup",
			want: []string{`f: Invalid value: "cleanup": name is neither a standard finalizer name nor is it fully qualified`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, validateKubeFinalizerName(tc.finalizer, field.NewPath("f")), tc.want)
		})
	}
}

func TestValidateEndpointIP(t *testing.T) {
	tests := []struct {
		name string
		ip   string
		want []string
	}{
		{name: "global unicast", ip: "10.1.2.3"},
		{name: "ipv6", ip: "2001:db8::1"},
		{name: "unspecified", ip: "0.0.0.0", want: []string{`ip: Invalid value: "0.0.0.0": may not be unspecified (0.0.0.0)`}},
		{name: "loopback", ip: "127.0.0.1", want: []string{`ip: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`}},
		{name: "link-local", ip: "169.254.169.254", want: []string{`ip: Invalid value: "169.254.169.254": may not be in the link-local range (169.254.0.0/16, fe80::/10)`}},
		{name: "link-local multicast", ip: "ff02::1", want: []string{`ip: Invalid value: "ff02::1": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, validateEndpointIP(tc.ip, field.NewPath("ip")), tc.want)
		})
	}
}
