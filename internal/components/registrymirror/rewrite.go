package registrymirror

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sirupsen/logrus"

	"github.com/kubeboot/kubeboot/internal/platform/registries"
)

// quietLog takes what containerd's resolver logs: each host it tries is
// a line at info, which on the node's terminal would be noise.
var quietLog = func() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}()

// serveRewritten answers the node's containerd from the mirrors of a
// registry that rename repositories, with containerd's own resolver and
// fetcher (their TLS, credentials and token exchange), or 404: containerd
// then asks the registry itself by the original name.
func (m *mirror) serveRewritten(w http.ResponseWriter, r *http.Request, req request, rw *registries.Rewrite) {
	renamed := req
	renamed.repository = rw.Apply(req.repository)
	desc, body, err := fetchRewritten(r, renamed, rw)
	if err != nil {
		if errdefs.IsNotFound(err) {
			writeError(w, http.StatusNotFound, unknownCode(req), fmt.Sprintf("%s: not on the mirrors as %s", req.image(), renamed.image()))
			return
		}
		m.logger.V(2).Info("Pulling from a registry's mirrors failed", "image", renamed.image(), "err", err)
		writeError(w, http.StatusBadGateway, "UNKNOWN", fmt.Sprintf("%s: the mirrors: %v", renamed.image(), err))
		return
	}
	if body != nil {
		defer body.Close()
	}
	w.Header().Set("Docker-Content-Digest", desc.Digest.String())
	w.Header().Set("Content-Length", strconv.FormatInt(desc.Size, 10))
	if req.kind == "manifests" {
		w.Header().Set("Content-Type", desc.MediaType)
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	if r.Method == http.MethodHead {
		return
	}
	m.logger.V(2).Info("Serving from a registry's mirrors", "image", req.image(), "as", renamed.image(), "kind", req.kind)
	_, _ = io.Copy(w, body)
}

// fetchRewritten finds req on the mirrors: its descriptor and, unless
// HEAD asked only about a manifest, its content. A manifest is resolved
// (by tag or digest); a blob fetched by digest straight away, since
// resolving a digest asks for a manifest first, and containerd's
// resolver rejects a layer answered as one.
func fetchRewritten(r *http.Request, req request, rw *registries.Rewrite) (ocispec.Descriptor, io.ReadCloser, error) {
	ctx := log.WithLogger(r.Context(), quietLog)
	resolver := docker.NewResolver(docker.ResolverOptions{Hosts: rw.Hosts})
	if req.kind == "manifests" {
		name, desc, err := resolver.Resolve(ctx, req.image())
		if err != nil || r.Method == http.MethodHead {
			return desc, nil, err
		}
		fetcher, err := resolver.Fetcher(ctx, name)
		if err != nil {
			return desc, nil, err
		}
		body, err := fetcher.Fetch(ctx, desc)
		return desc, body, err
	}
	dgst, err := digest.Parse(req.reference)
	if err != nil {
		return ocispec.Descriptor{}, nil, fmt.Errorf("%w: %w", errdefs.ErrInvalidArgument, err)
	}
	fetcher, err := resolver.Fetcher(ctx, req.image())
	if err != nil {
		return ocispec.Descriptor{}, nil, err
	}
	byDigest, ok := fetcher.(remotes.FetcherByDigest)
	if !ok {
		return ocispec.Descriptor{}, nil, errors.New("containerd's fetcher cannot fetch by digest")
	}
	body, desc, err := byDigest.FetchByDigest(ctx, dgst)
	return desc, body, err
}
