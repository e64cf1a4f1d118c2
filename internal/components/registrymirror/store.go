package registrymirror

import (
	"context"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// containerdStore is a Store on the containerd at a socket, in one
// namespace.
type containerdStore struct{ client *containerd.Client }

// NewContainerdStore returns the Store of the containerd at socket, in
// namespace, and its close.
func NewContainerdStore(socket, namespace string) (Store, func() error, error) {
	client, err := containerd.New(socket, containerd.WithDefaultNamespace(namespace))
	if err != nil {
		return nil, nil, err
	}
	return &containerdStore{client: client}, client.Close, nil
}

func (s *containerdStore) Resolve(ctx context.Context, name string) (ocispec.Descriptor, error) {
	img, err := s.client.ImageService().Get(ctx, name)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return img.Target, nil
}

func (s *containerdStore) Open(ctx context.Context, dgst digest.Digest) (Content, int64, error) {
	store := s.client.ContentStore()
	info, err := store.Info(ctx, dgst)
	if err != nil {
		return nil, 0, err
	}
	ra, err := store.ReaderAt(ctx, ocispec.Descriptor{Digest: dgst, Size: info.Size})
	if err != nil {
		return nil, 0, err
	}
	return ra, info.Size, nil
}
