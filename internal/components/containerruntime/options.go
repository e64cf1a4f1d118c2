// Package containerruntime is a node's container runtime: by default
// containerd 2, embedded in kubeboot's binary (embedded), run as a child
// process with a configuration kubeboot writes in the node's directory,
// restarted if it dies and stopped with the node, its running containers
// kept (their shims outlive it, as with k3s); or, with
// --container-runtime-endpoint, a CRI runtime of the host's (CRI-O, a
// host containerd).
package containerruntime

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kubeboot/kubeboot/internal/platform/registries"
)

// Snapshotters are the snapshotters the embedded containerd has.
var Snapshotters = []string{"overlayfs", "native"}

// DefaultPauseImage is the Pods' sandbox image: the kubelet 1.37's own
// (its --pod-infra-container-image default) and containerd 2.4's.
const DefaultPauseImage = "registry.k8s.io/pause:3.10.1"

// Options are the flags of a node's container runtime.
type Options struct {
	// Endpoint is --container-runtime-endpoint: a CRI runtime of the
	// host's instead of the embedded containerd; "" for the embedded one.
	Endpoint string
	// PauseImage is --pause-image: the embedded containerd's sandbox
	// image.
	PauseImage string
	// Snapshotter is --snapshotter: the embedded containerd's
	// snapshotter for the Pods' images.
	Snapshotter string
	// PrivateRegistry is --private-registry: the embedded containerd's
	// registries.yaml.
	PrivateRegistry string

	// registries is PrivateRegistry read (Validate).
	registries *registries.Config
}

// NewOptions returns the defaults: the embedded containerd on overlayfs.
func NewOptions() *Options {
	return &Options{PauseImage: DefaultPauseImage, Snapshotter: Snapshotters[0], PrivateRegistry: registries.DefaultPath}
}

// AddFlags registers the flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Endpoint, "container-runtime-endpoint", o.Endpoint,
		"The CRI runtime of this host the kubelet uses (unix:///run/crio/crio.sock), instead of the containerd embedded in kubeboot.")
	fs.StringVar(&o.PauseImage, "pause-image", o.PauseImage,
		"The embedded containerd's Pod sandbox (pause) image.")
	fs.StringVar(&o.Snapshotter, "snapshotter", o.Snapshotter,
		"The embedded containerd's snapshotter for the Pods' images: "+strings.Join(Snapshotters, " or ")+".")
	fs.StringVar(&o.PrivateRegistry, "private-registry", o.PrivateRegistry,
		"The embedded containerd's registries.yaml (k3s's format): mirrors and each registry's auth and TLS; read if it exists.")
}

// Validate checks the flags; each problem names its flag.
func (o *Options) Validate() error {
	if o.Endpoint != "" && !strings.HasPrefix(o.Endpoint, "unix://") {
		return fmt.Errorf("--container-runtime-endpoint %q: want unix:///path/to/socket", o.Endpoint)
	}
	if !slices.Contains(Snapshotters, o.Snapshotter) {
		return fmt.Errorf("--snapshotter %q: want one of %s", o.Snapshotter, strings.Join(Snapshotters, ", "))
	}
	if o.PauseImage == "" {
		return fmt.Errorf("--pause-image: must not be empty")
	}
	// Read now, so that a bad file stops the node before it starts.
	var err error
	if o.registries, err = registries.Read(o.PrivateRegistry, o.PrivateRegistry != registries.DefaultPath); err != nil {
		return fmt.Errorf("--private-registry: %w", err)
	}
	return nil
}

// Embedded reports whether the node runs the embedded containerd.
func (o *Options) Embedded() bool { return o.Endpoint == "" }

// Mirrored are the registries the node's registries.yaml lists under
// mirrors ("*": every one): those the embedded registry mirror serves.
func (o *Options) Mirrored() []string {
	if o.registries == nil {
		return nil
	}
	return o.registries.Mirrored()
}

// Rewrites are the registries whose mirrors rewrite repositories, by
// name: the node's registry mirror pulls from those mirrors for the
// embedded containerd.
func (o *Options) Rewrites() (map[string]*registries.Rewrite, error) {
	if o.registries == nil {
		return nil, nil
	}
	return o.registries.Rewrites()
}
