package apiserver

import (
	"bytes"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// malformedPatch lists messages k8s.io/apiserver reports as internal
// errors (500) although the patch in the request is at fault: an unknown
// strategic merge patch directive, a directive of the wrong type, or an
// apply configuration that does not fit the object's schema (upstream
// kubernetes/kubernetes#122480). The client must fix its request, so
// kubeboot answers 400 Bad Request with the same message.
var malformedPatch = []string{
	"unknown patch type",
	"expected a []interface {}, but received",
	"failed to create typed patch object",
	"Unable to find api field",
	"unable to find api field",
}

// withPatchErrors rewrites those 500s of PATCH requests into 400s.
func withPatchErrors(handler http.Handler, codecs serializer.CodecFactory) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPatch {
			handler.ServeHTTP(w, req)
			return
		}
		pw := &patchErrorWriter{ResponseWriter: w}
		handler.ServeHTTP(pw, req)
		pw.finish(codecs)
	})
}

// patchErrorWriter holds back a 500 response to inspect its Status.
type patchErrorWriter struct {
	http.ResponseWriter
	held bool
	buf  bytes.Buffer
}

func (w *patchErrorWriter) WriteHeader(code int) {
	if code == http.StatusInternalServerError {
		w.held = true
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *patchErrorWriter) Write(b []byte) (int, error) {
	if w.held {
		return w.buf.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// finish sends the held response, rewritten if it is a malformed patch.
func (w *patchErrorWriter) finish(codecs serializer.CodecFactory) {
	if !w.held {
		return
	}
	body := w.buf.Bytes()
	if out, ok := rewrite(body, w.Header().Get("Content-Type"), codecs); ok {
		w.ResponseWriter.WriteHeader(http.StatusBadRequest)
		_, _ = w.ResponseWriter.Write(out)
		return
	}
	w.ResponseWriter.WriteHeader(http.StatusInternalServerError)
	_, _ = w.ResponseWriter.Write(body)
}

// rewrite turns a 500 Status about a malformed patch into a 400 Status in
// the same encoding.
func rewrite(body []byte, contentType string, codecs serializer.CodecFactory) ([]byte, bool) {
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, false
	}
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		return nil, false
	}
	obj, _, err := info.Serializer.Decode(body, nil, &metav1.Status{})
	status, isStatus := obj.(*metav1.Status)
	if err != nil || !isStatus || !isMalformedPatch(status.Message) {
		return nil, false
	}
	bad := apierrors.NewBadRequest(status.Message).ErrStatus
	bad.TypeMeta = status.TypeMeta
	var out bytes.Buffer
	if err := info.Serializer.Encode(&bad, &out); err != nil {
		return nil, false
	}
	return out.Bytes(), true
}

func isMalformedPatch(msg string) bool {
	for _, m := range malformedPatch {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}
