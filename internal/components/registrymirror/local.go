package registrymirror

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// maxManifestSize bounds the manifests the mirror reads whole, as
// containerd bounds those it fetches.
const maxManifestSize = 4 << 20

// Store is the content of the node's containerd.
type Store interface {
	// Resolve returns the descriptor of the image named name (registry/
	// repository:tag); an error errdefs.IsNotFound if there is none.
	Resolve(ctx context.Context, name string) (ocispec.Descriptor, error)
	// Open returns the content of dgst and its size; an error
	// errdefs.IsNotFound if the store does not hold it.
	Open(ctx context.Context, dgst digest.Digest) (Content, int64, error)
}

// Content is content of the store being read.
type Content interface {
	io.ReaderAt
	io.Closer
}

// serveLocal answers another node from this node's content: a manifest by
// tag or digest, or a blob by digest.
func (m *mirror) serveLocal(w http.ResponseWriter, r *http.Request, req request) {
	ctx := r.Context()
	var dgst digest.Digest
	var mediaType string
	if d, err := digest.Parse(req.reference); err == nil {
		dgst = d
	} else if req.kind == "manifests" {
		desc, err := m.store.Resolve(ctx, req.image())
		if err != nil {
			m.storeError(w, err, req)
			return
		}
		dgst, mediaType = desc.Digest, desc.MediaType
	} else {
		writeError(w, http.StatusBadRequest, "DIGEST_INVALID", err.Error())
		return
	}
	content, size, err := m.store.Open(ctx, dgst)
	if err != nil {
		m.storeError(w, err, req)
		return
	}
	defer content.Close()
	w.Header().Set("Docker-Content-Digest", dgst.String())
	if req.kind == "manifests" {
		if mediaType == "" {
			mediaType = manifestMediaType(io.NewSectionReader(content, 0, min(size, maxManifestSize)))
		}
		w.Header().Set("Content-Type", mediaType)
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	// Range requests too: containerd resumes a broken blob download.
	http.ServeContent(w, r, "", time.Time{}, io.NewSectionReader(content, 0, size))
}

// storeError answers a failed read of the store.
func (m *mirror) storeError(w http.ResponseWriter, err error, req request) {
	if errdefs.IsNotFound(err) {
		writeError(w, http.StatusNotFound, unknownCode(req), req.image()+": not on this node")
		return
	}
	m.logger.Error(err, "Reading the node's images", "image", req.image())
	writeError(w, http.StatusInternalServerError, "UNKNOWN", "reading the node's images failed")
}

// manifestMediaType is the media type of the manifest in r, which the
// content store does not keep: the one it names, else the OCI index's or
// manifest's by its fields.
func manifestMediaType(r io.Reader) string {
	var m struct {
		MediaType string          `json:"mediaType"`
		Manifests json.RawMessage `json:"manifests"`
	}
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		return ocispec.MediaTypeImageManifest
	}
	switch {
	case m.MediaType != "":
		return m.MediaType
	case m.Manifests != nil:
		return ocispec.MediaTypeImageIndex
	default:
		return ocispec.MediaTypeImageManifest
	}
}
