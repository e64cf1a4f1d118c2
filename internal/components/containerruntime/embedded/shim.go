package embedded

import (
	"embed"
	"errors"
	"io/fs"
)

// ShimPackage is containerd's own runc shim command, of the containerd
// module kubeboot links, which builds provide as the lean shim.
const ShimPackage = "github.com/containerd/containerd/v2/cmd/" + ShimName

// ShimOverlay is where a build puts the lean shim, relative to the
// module's root, for go:embed below: `go build -overlay` maps this path
// to containerd's own containerd-shim-runc-v2 built from the module in
// kubeboot's graph (hack/release.sh, test/harness.Build). It is not in
// git; shim/README.md keeps the directory.
const ShimOverlay = "internal/components/containerruntime/embedded/shim/" + ShimName

// shimFS holds the lean shim when the build provided one.
//
//go:embed shim
var shimFS embed.FS

// LeanShim opens the lean shim embedded in this binary: containerd's own
// runc shim, a 14 MB program that starts in a millisecond. Without it the
// shim is kubeboot's own binary (IsShim), whose package initialization
// costs every Pod's shim ~0.1 s of CPU and ~20 MB of heap. ok is false
// when this build embedded none.
func LeanShim() (f fs.File, ok bool, err error) {
	f, err = shimFS.Open("shim/" + ShimName)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return f, true, nil
}
