package kubescheduler

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// HostnameSpreading is the default spreading of Pods (PodTopologySpread's
// defaultConstraints) for a cluster whose nodes carry no zone label, such
// as kubeboot's simulated nodes: the hostname constraint of upstream's
// system defaults alone, as a List.
//
// Upstream's System defaults spread by hostname and by zone. On a node
// without the zone label the zone constraint adds nothing to the node's
// score, yet PreScore counts it: for every Pod scheduled it matches every
// Pod of the cluster against the Pod's selector, a cost that grows with the
// cluster (27% of the server's CPU five minutes into bench/nodes' 1,000
// nodes and 30,000 Pods).
// Without it the scores, and so the decisions, are the same on such
// nodes. On nodes labelled with zones they are not: a user who labels
// them gives --scheduler-config.
var HostnameSpreading = []corev1.TopologySpreadConstraint{{
	TopologyKey:       corev1.LabelHostname,
	WhenUnsatisfiable: corev1.ScheduleAnyway,
	MaxSkew:           3,
}}

// spreadByHostname sets profile's PodTopologySpread defaults to
// HostnameSpreading.
func spreadByHostname(profile *config.KubeSchedulerProfile) {
	args := &config.PodTopologySpreadArgs{DefaultConstraints: HostnameSpreading, DefaultingType: config.ListDefaulting}
	for i := range profile.PluginConfig {
		if profile.PluginConfig[i].Name == names.PodTopologySpread {
			profile.PluginConfig[i].Args = args
			return
		}
	}
	profile.PluginConfig = append(profile.PluginConfig, config.PluginConfig{Name: names.PodTopologySpread, Args: args})
}
