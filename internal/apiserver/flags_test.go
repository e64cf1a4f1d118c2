package apiserver

import (
	"slices"
	"testing"

	kubeoptions "k8s.io/kubernetes/pkg/kubeapiserver/options"
)

// TestEnabledAdmission: the plugins the published
// --enable-admission-plugins lists are those the chain runs, in its
// order: the defaults, what --enable-admission-plugins adds and
// --disable-admission-plugins takes away, or exactly the deprecated
// --admission-control's.
func TestEnabledAdmission(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		enable, disable, plugin []string
		want, not               []string
	}{
		{name: "defaults", want: []string{"NamespaceLifecycle", "ServiceAccount", "ResourceQuota"}, not: []string{"AlwaysAdmit", "NodeRestriction", "AlwaysPullImages"}},
		{name: "enabled and disabled", enable: []string{"NodeRestriction", "AlwaysPullImages"}, disable: []string{"ServiceAccount"},
			want: []string{"NamespaceLifecycle", "NodeRestriction", "AlwaysPullImages"}, not: []string{"ServiceAccount"}},
		{name: "--admission-control", plugin: []string{"NamespaceLifecycle", "NodeRestriction"},
			want: []string{"NamespaceLifecycle", "NodeRestriction"}, not: []string{"ServiceAccount", "ResourceQuota"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := kubeoptions.NewAdmissionOptions()
			a.GenericAdmission.EnablePlugins, a.GenericAdmission.DisablePlugins, a.PluginNames = tc.enable, tc.disable, tc.plugin
			got := enabledAdmission(a)
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("%s not in %v", w, got)
				}
			}
			for _, n := range tc.not {
				if slices.Contains(got, n) {
					t.Errorf("%s in %v", n, got)
				}
			}
			// In the chain's order.
			order := a.GenericAdmission.RecommendedPluginOrder
			if !slices.IsSortedFunc(got, func(x, y string) int { return slices.Index(order, x) - slices.Index(order, y) }) {
				t.Errorf("%v is not in the chain's order", got)
			}
		})
	}
}
