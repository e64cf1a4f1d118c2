package containerruntime

import (
	"context"
	"io"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
)

// criImageLabel marks an image as the CRI plugin's, as images it pulls
// are.
var criImageLabel = map[string]string{"io.cri-containerd.image": "managed"}

// containerdStore is the image store of the containerd at a socket, in
// the CRI plugin's namespace.
type containerdStore struct {
	client      *containerd.Client
	snapshotter string
}

func newImageStore(socket, snapshotter string) (imageStore, func(), error) {
	client, err := containerd.New(socket, containerd.WithDefaultNamespace(CRINamespace))
	if err != nil {
		return nil, nil, err
	}
	return &containerdStore{client: client, snapshotter: snapshotter}, func() { client.Close() }, nil
}

func (s *containerdStore) Import(ctx context.Context, r io.Reader) ([]string, error) {
	platform := platforms.Default()
	imported, err := s.client.Import(ctx, r, containerd.WithImportPlatform(platform), containerd.WithImageLabels(criImageLabel))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, img := range imported {
		// Unpacked now, not when the first Pod starts.
		image := containerd.NewImageWithPlatform(s.client, img, platform)
		if err := image.Unpack(ctx, s.snapshotter); err != nil {
			return nil, err
		}
		// Also named by its ID, as the CRI plugin names what it pulls:
		// the kubelet asks for image volumes by ID.
		config, err := image.Config(ctx)
		if err != nil {
			return nil, err
		}
		byID := images.Image{Name: config.Digest.String(), Target: img.Target, Labels: criImageLabel}
		if _, err := s.client.ImageService().Create(ctx, byID); errdefs.IsAlreadyExists(err) {
			_, err = s.client.ImageService().Update(ctx, byID)
		}
		if err != nil {
			return nil, err
		}
		names = append(names, img.Name)
	}
	return names, nil
}

func (s *containerdStore) Has(ctx context.Context, name string) bool {
	_, err := s.client.ImageService().Get(ctx, name)
	return err == nil
}
