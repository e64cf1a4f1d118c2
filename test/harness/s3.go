package harness

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// S3 is an S3 service a test serves: gofakes3 in memory, over TLS, which
// takes only requests signed (AWS Signature Version 4) with its keys.
type S3 struct {
	// Endpoint is its host:port, CAFile its certificate's PEM.
	Endpoint, CAFile string
	// AccessKey and SecretKey are the keys it takes.
	AccessKey, SecretKey string
	// Backend holds the buckets and objects.
	Backend *s3mem.Backend
	server  *httptest.Server
}

// StartS3 serves an S3 service with bucket until the test ends.
func StartS3(t testing.TB, bucket string) *S3 {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	s := &S3{AccessKey: "kubeboot-test-access", SecretKey: "kubeboot-test-secret-key", Backend: backend}
	s.server = httptest.NewTLSServer(s.signedOnly(gofakes3.New(backend).Server()))
	t.Cleanup(s.server.Close)
	s.Endpoint = strings.TrimPrefix(s.server.URL, "https://")
	s.CAFile = filepath.Join(t.TempDir(), "s3-ca.crt")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.server.Certificate().Raw})
	if err := os.WriteFile(s.CAFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// Objects lists the keys of bucket's objects.
func (s *S3) Objects(t testing.TB, bucket string) []string {
	t.Helper()
	list, err := s.Backend.ListBucket(bucket, &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range list.Contents {
		keys = append(keys, o.Key)
	}
	slices.Sort(keys)
	return keys
}

// signedOnly answers 403 to a request not signed with the keys, as S3
// does: InvalidAccessKeyId for another access key, SignatureDoesNotMatch
// for another secret.
func (s *S3) signedOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := s.check(r)
		if code == "" {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, code)
	})
}

// check verifies r's Signature Version 4, returning S3's error code, or ""
// if it holds.
func (s *S3) check(r *http.Request) string {
	auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ")
	if !ok {
		return "AccessDenied"
	}
	fields := map[string]string{}
	for _, f := range strings.Split(auth, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/") // key/date/region/service/aws4_request
	if len(scope) != 5 {
		return "AccessDenied"
	}
	if scope[0] != s.AccessKey {
		return "InvalidAccessKeyId"
	}
	signed := strings.Split(fields["SignedHeaders"], ";")
	var canonical strings.Builder
	canonical.WriteString(r.Method + "\n" + escapePath(r.URL.EscapedPath()) + "\n" + canonicalQuery(r.URL.Query()) + "\n")
	for _, h := range signed {
		v := r.Header.Get(h)
		if h == "host" {
			v = r.Host
		}
		canonical.WriteString(h + ":" + strings.TrimSpace(v) + "\n")
	}
	canonical.WriteString("\n" + fields["SignedHeaders"] + "\n" + r.Header.Get("X-Amz-Content-Sha256"))
	sum := sha256.Sum256([]byte(canonical.String()))
	toSign := "AWS4-HMAC-SHA256\n" + r.Header.Get("X-Amz-Date") + "\n" + strings.Join(scope[1:], "/") + "\n" + hex.EncodeToString(sum[:])
	key := []byte("AWS4" + s.SecretKey)
	for _, part := range scope[1:] {
		key = hmacSHA256(key, part)
	}
	if !hmac.Equal([]byte(hex.EncodeToString(hmacSHA256(key, toSign))), []byte(fields["Signature"])) {
		return "SignatureDoesNotMatch"
	}
	return ""
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// escapePath is the path as Signature Version 4 encodes it.
func escapePath(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// canonicalQuery is the query as Signature Version 4 encodes it: sorted,
// each key and value escaped.
func canonicalQuery(q url.Values) string {
	var parts []string
	for k, vs := range q {
		for _, v := range vs {
			parts = append(parts, escape(k)+"="+escape(v))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, "&")
}

func escape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}
