// Package componentmetrics adjusts the metrics options of the upstream
// components kubeboot runs in its process (kube-controller-manager,
// kube-scheduler).
package componentmetrics

import "k8s.io/component-base/metrics"

// OrNil is o, or nil when it sets nothing (no --show-hidden-metrics-for-version,
// --disabled-metrics, --allow-metric-labels or
// --allow-metric-labels-manifest): component-base 1.37's Apply then does
// nothing, where with nothing set it logs an error for the label
// allow-list it was not given ("The manifest file is empty, ignoring.")
// at every start of either component.
func OrNil(o *metrics.Options) *metrics.Options {
	if o == nil {
		return nil
	}
	c := o.MetricsConfiguration
	if c.ShowHiddenMetricsForVersion == "" && len(c.DisabledMetrics) == 0 && len(c.AllowListMapping) == 0 && c.AllowListMappingManifest == "" {
		return nil
	}
	return o
}
