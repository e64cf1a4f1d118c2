package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ServeImages serves the images of the OCI layout at layoutPath (as
// BuildImages writes it) from a registry listening on l, plain HTTP, its
// blobs kept in blobDir, until ctx ends: each under its name with the
// registry's host left out (registry.k8s.io/pause:3.10.2 as pause:3.10.2),
// so that a node mirrors registry.k8s.io (and docker.io) to it. It returns
// how many images it serves once every one is there.
func ServeImages(ctx context.Context, l net.Listener, layoutPath, blobDir string) (int, error) {
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)),
		registry.WithBlobHandler(registry.NewDiskBlobHandler(blobDir)))}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Printf("image registry: %v", err)
		}
	}()
	context.AfterFunc(ctx, func() { _ = srv.Close() })

	p, err := layout.FromPath(layoutPath)
	if err != nil {
		return 0, err
	}
	index, err := p.ImageIndex()
	if err != nil {
		return 0, err
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		return 0, err
	}
	host := l.Addr().String()
	for _, desc := range manifest.Manifests {
		ref := desc.Annotations[imageRefName]
		img, err := index.Image(desc.Digest)
		if err != nil {
			return 0, fmt.Errorf("image %s: %w", ref, err)
		}
		// registry.k8s.io/e2e-test-images/agnhost:2.66.1 → HOST/e2e-test-images/agnhost:2.66.1
		_, repo, ok := strings.Cut(ref, "/")
		if !ok {
			return 0, fmt.Errorf("image %q has no registry in its name", ref)
		}
		tag, err := name.NewTag(host+"/"+repo, name.Insecure)
		if err != nil {
			return 0, fmt.Errorf("image %s: %w", ref, err)
		}
		if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
			return 0, fmt.Errorf("pushing %s: %w", ref, err)
		}
	}
	return len(manifest.Manifests), nil
}
