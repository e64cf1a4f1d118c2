package controlplane

import "github.com/kubeboot/kubeboot/internal/platform/nodesettings"

// NodeSettings are the cluster's settings that every node runs with
// (Config.Nodes): its cluster DNS and domain, pod network, local storage,
// embedded registry mirror and NetworkPolicy enforcement. Components read
// them resolved (Settings.Nodes); agents are handed them when they join.
type NodeSettings = nodesettings.Settings
