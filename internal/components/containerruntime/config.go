package containerruntime

import (
	"github.com/pelletier/go-toml/v2"
)

// configValues are what the embedded containerd's configuration says.
type configValues struct {
	Root, State, Socket     string
	Snapshotter, PauseImage string
	CNIBinDirs              []string
	CNIConfDir              string
	// RegistryConfigDir holds a hosts.toml per registry (registries),
	// RegistryAuths the credentials by host.
	RegistryConfigDir string
	RegistryAuths     map[string]any
	// RestrictOOMScoreAdj keeps containers' OOM score adjustment at or
	// above containerd's own, for a host whose root may not lower it
	// (no CAP_SYS_RESOURCE, as in some containers): else the kubelet's
	// -998 for a sandbox fails in runc.
	RestrictOOMScoreAdj bool
}

// renderConfig returns containerd's configuration (version 3, containerd
// 2's) for v: its root, state and socket in the node's directory, the CRI
// plugin on runc with the node's CNI configuration, and nothing that
// listens elsewhere or is shared with another containerd on the host (NRI's
// socket, /opt/containerd).
func renderConfig(v configValues) ([]byte, error) {
	type table = map[string]any
	return toml.Marshal(table{
		"version": 3,
		"root":    v.Root,
		"state":   v.State,
		"grpc":    table{"address": v.Socket},
		"plugins": table{
			"io.containerd.cri.v1.images": table{
				"snapshotter":   v.Snapshotter,
				"pinned_images": table{"sandbox": v.PauseImage},
				"registry":      table{"config_path": v.RegistryConfigDir, "configs": v.RegistryAuths},
			},
			"io.containerd.cri.v1.runtime": table{
				"restrict_oom_score_adj": v.RestrictOOMScoreAdj,
				"cni":                    table{"bin_dirs": v.CNIBinDirs, "conf_dir": v.CNIConfDir},
				"containerd": table{
					"default_runtime_name": "runc",
					"runtimes":             table{"runc": table{"runtime_type": "io.containerd.runc.v2"}},
				},
			},
			"io.containerd.nri.v1.nri":      table{"disable": true},
			"io.containerd.internal.v1.opt": table{"path": v.Root + "/opt"},
		},
	})
}
