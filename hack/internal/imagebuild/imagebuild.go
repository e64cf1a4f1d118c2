// Package imagebuild makes the one-layer images kubeboot's generators
// write (hack/image, hack/pauseimage) with go-containerregistry, without a
// container daemon, reproducibly: the layer's bytes as given, the
// configuration created at the Unix epoch.
package imagebuild

import (
	"bytes"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// OneLayer is an image for linux/arch of the layer layerTar (an
// uncompressed tar), its run configuration as configure sets it.
func OneLayer(layerTar []byte, arch string, configure func(*v1.ConfigFile)) (v1.Image, error) {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	configure(cfg)
	return mutate.ConfigFile(img, cfg)
}
