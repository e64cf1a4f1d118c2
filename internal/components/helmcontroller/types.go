package helmcontroller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The kinds of k3s's helm-controller, helm.cattle.io/v1, with the fields
// of its types (github.com/k3s-io/helm-controller), so that its users'
// manifests apply. They are read from unstructured objects (the
// controller's informers are dynamic), so they need no generated code.
var (
	// GroupVersion is the kinds' API group and version.
	GroupVersion    = schema.GroupVersion{Group: "helm.cattle.io", Version: "v1"}
	chartsResource  = GroupVersion.WithResource("helmcharts")
	configsResource = GroupVersion.WithResource("helmchartconfigs")
)

// HelmChart is a release of a chart the controller installs, upgrades
// and uninstalls.
type HelmChart struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              HelmChartSpec   `json:"spec,omitempty"`
	Status            HelmChartStatus `json:"status,omitempty"`
}

// HelmChartSpec is what to install and how.
type HelmChartSpec struct {
	TargetNamespace       string                        `json:"targetNamespace,omitempty"`
	CreateNamespace       bool                          `json:"createNamespace,omitempty"`
	Chart                 string                        `json:"chart,omitempty"`
	Version               string                        `json:"version,omitempty"`
	Repo                  string                        `json:"repo,omitempty"`
	RepoCA                string                        `json:"repoCA,omitempty"`
	RepoCAConfigMap       *localObjectReference         `json:"repoCAConfigMap,omitempty"`
	AuthSecret            *localObjectReference         `json:"authSecret,omitempty"`
	AuthPassCredentials   bool                          `json:"authPassCredentials,omitempty"`
	InsecureSkipTLSVerify bool                          `json:"insecureSkipTLSVerify,omitempty"`
	PlainHTTP             bool                          `json:"plainHTTP,omitempty"`
	ChartContent          string                        `json:"chartContent,omitempty"`
	ValuesContent         string                        `json:"valuesContent,omitempty"`
	ValuesSecrets         []secretSpec                  `json:"valuesSecrets,omitempty"`
	Set                   map[string]intstr.IntOrString `json:"set,omitempty"`
	Timeout               *metav1.Duration              `json:"timeout,omitempty"`
	FailurePolicy         string                        `json:"failurePolicy,omitempty"`
}

// HelmChartStatus says what the controller last did.
type HelmChartStatus struct {
	JobName            string           `json:"jobName,omitempty"`
	ObservedGeneration int64            `json:"observedGeneration,omitempty"`
	Revision           int              `json:"revision,omitempty"`
	Digest             string           `json:"digest,omitempty"`
	Conditions         []chartCondition `json:"conditions,omitempty"`
}

// HelmChartConfig overrides the values of the HelmChart of its name and
// namespace (k3s's way to configure a packaged chart).
type HelmChartConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              HelmChartConfigSpec `json:"spec,omitempty"`
}

// HelmChartConfigSpec holds the values.
type HelmChartConfigSpec struct {
	ValuesContent string       `json:"valuesContent,omitempty"`
	ValuesSecrets []secretSpec `json:"valuesSecrets,omitempty"`
	FailurePolicy string       `json:"failurePolicy,omitempty"`
}

type localObjectReference struct {
	Name string `json:"name,omitempty"`
}

// secretSpec names values files in a Secret: its keys (default all, in
// name order).
type secretSpec struct {
	Name          string   `json:"name,omitempty"`
	Keys          []string `json:"keys,omitempty"`
	IgnoreUpdates bool     `json:"ignoreUpdates,omitempty"`
}

// chartCondition is a condition of a HelmChart.
type chartCondition struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	Reason             string      `json:"reason,omitempty"`
	Message            string      `json:"message,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// Condition types.
const (
	// conditionDeployed is True once the release's revision for the
	// HelmChart's current spec is deployed.
	conditionDeployed = "Deployed"
	// conditionFailed is True while the last attempt failed (k3s's
	// condition of the same name).
	conditionFailed = "Failed"
)

// Failure policies.
const (
	policyReinstall = "reinstall"
	policyAbort     = "abort"
)
