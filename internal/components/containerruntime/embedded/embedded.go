// Package embedded is containerd 2 inside kubeboot's binary, as k3s embeds
// it: containerd's own command with the plugins a node needs (the CRI
// plugin, the overlayfs and native snapshotters, the runc v2 runtime and
// its shim), containerd's ctr, and the runc shim itself, which containerd
// starts by the name of a link to this binary.
//
// Only the plugins a Kubernetes node uses are linked, not containerd's
// whole builtins set (btrfs, zfs, devmapper, blockfile, erofs, tracing):
// each costs every kubeboot process its package initialization and the
// binary its size.
package embedded

import (
	"os"
	"path/filepath"
)

// ShimName is the runc v2 shim's binary name: containerd runs the runtime
// io.containerd.runc.v2 as the program of this name on its PATH.
const ShimName = "containerd-shim-runc-v2"

// ShimEnv tells a kubeboot process that it is the runc shim: the shim
// starts its long-lived copy from its own executable, which is
// kubeboot's, not the link containerd started it by.
const ShimEnv = "KUBEBOOT_CONTAINERD_SHIM"

// IsShim reports whether this process, invoked as argv0, is the runc
// shim: by the link's name, or as the copy a shim started.
func IsShim(argv0 string) bool {
	return filepath.Base(argv0) == ShimName || os.Getenv(ShimEnv) != ""
}
