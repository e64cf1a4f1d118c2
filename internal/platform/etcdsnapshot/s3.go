package etcdsnapshot

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// S3Options are k3s's --etcd-s3 flags: snapshots are uploaded to a bucket
// of an S3 service besides being kept in the snapshot directory.
type S3Options struct {
	// Enabled is --etcd-s3.
	Enabled bool
	// Endpoint is --etcd-s3-endpoint: the service's host[:port].
	Endpoint string
	// EndpointCA is --etcd-s3-endpoint-ca: a PEM file of CAs the
	// service's certificate is checked against, besides the system's.
	EndpointCA string
	// SkipSSLVerify is --etcd-s3-skip-ssl-verify.
	SkipSSLVerify bool
	// Insecure is --etcd-s3-insecure: plain http.
	Insecure bool
	// Bucket, Folder and Region are --etcd-s3-bucket, -folder and
	// -region: snapshots are the objects <folder>/<name> of the bucket.
	Bucket, Folder, Region string
	// AccessKey and SecretKey are --etcd-s3-access-key and
	// --etcd-s3-secret-key (default: $AWS_ACCESS_KEY_ID and
	// $AWS_SECRET_ACCESS_KEY).
	AccessKey, SecretKey string
	// Timeout is --etcd-s3-timeout: how long one upload, listing, download
	// or deletion may take.
	Timeout time.Duration
	// ConfigSecret is --etcd-s3-config-secret: a Secret in kube-system
	// whose keys, the flags' names, configure the bucket instead of the
	// flags, read at each snapshot (FromSecret).
	ConfigSecret string
	// endpointCAData is the CAs' PEM of a ConfigSecret.
	endpointCAData []byte
}

// NewS3Options returns k3s's defaults.
func NewS3Options() S3Options {
	return S3Options{Endpoint: "s3.amazonaws.com", Region: "us-east-1", Timeout: 5 * time.Minute}
}

// AddFlags registers the flags on fs.
func (o *S3Options) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "etcd-s3", o.Enabled, "Upload snapshots to an S3 bucket too (--etcd-s3-bucket), and apply the retention there.")
	fs.StringVar(&o.Endpoint, "etcd-s3-endpoint", o.Endpoint, "The S3 service's host[:port], not a URL.")
	fs.StringVar(&o.EndpointCA, "etcd-s3-endpoint-ca", o.EndpointCA, "A PEM file of CAs to check the S3 service's certificate against, besides the system's.")
	fs.BoolVar(&o.SkipSSLVerify, "etcd-s3-skip-ssl-verify", o.SkipSSLVerify, "Do not check the S3 service's certificate.")
	fs.BoolVar(&o.Insecure, "etcd-s3-insecure", o.Insecure, "Reach the S3 service over plain http.")
	fs.StringVar(&o.Bucket, "etcd-s3-bucket", o.Bucket, "The bucket the snapshots go to.")
	fs.StringVar(&o.Folder, "etcd-s3-folder", o.Folder, "The folder of the bucket the snapshots go to.")
	fs.StringVar(&o.Region, "etcd-s3-region", o.Region, "The bucket's region.")
	fs.StringVar(&o.AccessKey, "etcd-s3-access-key", o.AccessKey, "The S3 access key. Default: $"+accessKeyEnv+".")
	fs.StringVar(&o.SecretKey, "etcd-s3-secret-key", o.SecretKey, "The S3 secret key. Default: $"+secretKeyEnv+".")
	fs.DurationVar(&o.Timeout, "etcd-s3-timeout", o.Timeout, "How long one upload, listing, download or deletion may take.")
	fs.StringVar(&o.ConfigSecret, "etcd-s3-config-secret", o.ConfigSecret, "A Secret in kube-system whose keys (etcd-s3-bucket, etcd-s3-endpoint, etcd-s3-endpoint-ca with the CAs' PEM, etcd-s3-access-key, ...) configure the bucket instead of the other --etcd-s3 flags, read at each snapshot.")
}

// Resolve returns the options to reach the bucket with: o, or with
// ConfigSecret those of the Secret, read through client.
func (o S3Options) Resolve(ctx context.Context, client kubernetes.Interface) (S3Options, error) {
	if o.ConfigSecret == "" {
		return o, nil
	}
	secret, err := client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, o.ConfigSecret, metav1.GetOptions{})
	if err != nil {
		return o, fmt.Errorf("--etcd-s3-config-secret %s: %w", o.ConfigSecret, err)
	}
	from, err := fromSecret(secret.Data)
	if err != nil {
		return o, fmt.Errorf("--etcd-s3-config-secret %s: %w", o.ConfigSecret, err)
	}
	return from, nil
}

// fromSecret returns the options a ConfigSecret's data gives, k3s's keys:
// the flags' names without their dashes, etcd-s3-endpoint-ca holding the
// CAs' PEM; the keys it lacks keep NewS3Options's defaults.
func fromSecret(data map[string][]byte) (S3Options, error) {
	o := NewS3Options()
	o.Enabled = true
	str := func(key string, into *string) {
		if v, ok := data[key]; ok {
			*into = strings.TrimSpace(string(v))
		}
	}
	str("etcd-s3-endpoint", &o.Endpoint)
	str("etcd-s3-bucket", &o.Bucket)
	str("etcd-s3-folder", &o.Folder)
	str("etcd-s3-region", &o.Region)
	str("etcd-s3-access-key", &o.AccessKey)
	str("etcd-s3-secret-key", &o.SecretKey)
	o.endpointCAData = data["etcd-s3-endpoint-ca"]
	var errs []error
	for key, into := range map[string]*bool{"etcd-s3-skip-ssl-verify": &o.SkipSSLVerify, "etcd-s3-insecure": &o.Insecure} {
		if v, ok := data[key]; ok {
			b, err := strconv.ParseBool(strings.TrimSpace(string(v)))
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", key, err))
			}
			*into = b
		}
	}
	if v, ok := data["etcd-s3-timeout"]; ok {
		d, err := time.ParseDuration(strings.TrimSpace(string(v)))
		if err != nil {
			errs = append(errs, fmt.Errorf("etcd-s3-timeout: %w", err))
		}
		o.Timeout = d
	}
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	return o, o.Validate()
}

// The environment the keys default to, AWS's (and k3s's).
const (
	accessKeyEnv = "AWS_ACCESS_KEY_ID"
	secretKeyEnv = "AWS_SECRET_ACCESS_KEY"
)

// Complete fills the keys from the environment if the flags left them
// empty; the flags are read first, so --help never shows a key.
func (o *S3Options) Complete() {
	if o.AccessKey == "" {
		o.AccessKey = os.Getenv(accessKeyEnv)
	}
	if o.SecretKey == "" {
		o.SecretKey = os.Getenv(secretKeyEnv)
	}
}

// Validate checks the flags, each error naming its flag.
func (o *S3Options) Validate() error {
	if !o.Enabled {
		return nil
	}
	var errs []error
	if o.Bucket == "" && o.ConfigSecret == "" {
		errs = append(errs, errors.New("--etcd-s3 needs --etcd-s3-bucket, or --etcd-s3-config-secret"))
	}
	if strings.Contains(o.Endpoint, "://") || strings.Contains(o.Endpoint, "/") || o.Endpoint == "" {
		errs = append(errs, fmt.Errorf("--etcd-s3-endpoint %q is not a host[:port] (no scheme or path; --etcd-s3-insecure for http)", o.Endpoint))
	} else if _, port, err := net.SplitHostPort(o.Endpoint); err == nil && port == "" {
		errs = append(errs, fmt.Errorf("--etcd-s3-endpoint %q has an empty port", o.Endpoint))
	}
	if o.EndpointCA != "" || o.endpointCAData != nil {
		if _, err := o.caPool(); err != nil {
			errs = append(errs, fmt.Errorf("--etcd-s3-endpoint-ca: %w", err))
		}
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--etcd-s3-timeout %s must be positive", o.Timeout))
	}
	if (o.AccessKey == "") != (o.SecretKey == "") {
		errs = append(errs, errors.New("--etcd-s3-access-key and --etcd-s3-secret-key go together"))
	}
	return errors.Join(errs...)
}

// caPool is the system's CAs and EndpointCA's.
func (o *S3Options) caPool() (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	data, from := o.endpointCAData, "etcd-s3-endpoint-ca"
	if data == nil {
		if data, err = os.ReadFile(o.EndpointCA); err != nil {
			return nil, err
		}
		from = o.EndpointCA
	}
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", from)
	}
	return pool, nil
}

// S3 is a bucket's folder of snapshots.
type S3 struct {
	client  *minio.Client
	bucket  string
	folder  string
	timeout time.Duration
}

// NewS3 returns the store o describes, once it has found its bucket: an
// unreachable service, refused keys or a missing bucket are errors here.
func NewS3(ctx context.Context, o S3Options) (*S3, error) {
	transport, err := minio.DefaultTransport(!o.Insecure)
	if err != nil {
		return nil, err
	}
	if transport.TLSClientConfig == nil {
		transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	transport.TLSClientConfig.InsecureSkipVerify = o.SkipSSLVerify
	if o.EndpointCA != "" || o.endpointCAData != nil {
		if transport.TLSClientConfig.RootCAs, err = o.caPool(); err != nil {
			return nil, fmt.Errorf("--etcd-s3-endpoint-ca: %w", err)
		}
	}
	creds := credentials.NewStaticV4(o.AccessKey, o.SecretKey, "")
	if o.AccessKey == "" {
		creds = credentials.New(&credentials.IAM{})
	}
	client, err := minio.New(o.Endpoint, &minio.Options{Creds: creds, Secure: !o.Insecure, Region: o.Region, Transport: transport})
	if err != nil {
		return nil, fmt.Errorf("--etcd-s3-endpoint %s: %w", o.Endpoint, err)
	}
	s := &S3{client: client, bucket: o.Bucket, folder: strings.Trim(o.Folder, "/"), timeout: o.Timeout}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	exists, err := client.BucketExists(ctx, o.Bucket)
	if err != nil {
		return nil, fmt.Errorf("S3 %s: %w", o.Endpoint, describe(err))
	}
	if !exists {
		return nil, fmt.Errorf("S3 %s: bucket %s does not exist (--etcd-s3-bucket)", o.Endpoint, o.Bucket)
	}
	return s, nil
}

// describe makes an S3 error answer a line a user acts on.
func describe(err error) error {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		switch resp.Code {
		case "InvalidAccessKeyId":
			return fmt.Errorf("the access key is refused (--etcd-s3-access-key): %w", err)
		case "SignatureDoesNotMatch", "AccessDenied":
			return fmt.Errorf("the keys are refused (--etcd-s3-access-key, --etcd-s3-secret-key): %w", err)
		case "NoSuchBucket":
			return fmt.Errorf("the bucket does not exist (--etcd-s3-bucket): %w", err)
		}
	}
	return err
}

// key is the object of the snapshot name.
func (s *S3) key(name string) string {
	if s.folder == "" {
		return name
	}
	return s.folder + "/" + name
}

// Location is where the store keeps a snapshot of name, for messages.
func (s *S3) Location(name string) string { return "s3://" + path.Join(s.bucket, s.key(name)) }

// Upload uploads a snapshot file.
func (s *S3) Upload(ctx context.Context, snap Snapshot) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.client.FPutObject(ctx, s.bucket, s.key(snap.Name), snap.Path, minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return fmt.Errorf("uploading %s to %s: %w", snap.Name, s.Location(snap.Name), describe(err))
	}
	return nil
}

// List returns the snapshots of the folder, oldest first; their Path is
// their location.
func (s *S3) List(ctx context.Context) ([]Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	prefix := ""
	if s.folder != "" {
		prefix = s.folder + "/"
	}
	var out []Snapshot
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("listing %s: %w", s.Location(""), describe(obj.Err))
		}
		name := strings.TrimPrefix(obj.Key, prefix)
		if name == "" || strings.Contains(name, "/") {
			continue
		}
		out = append(out, Snapshot{Name: name, Path: s.Location(name), Size: obj.Size, Created: obj.LastModified})
	}
	slices.SortFunc(out, func(a, b Snapshot) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// Delete deletes the snapshots named.
func (s *S3) Delete(ctx context.Context, names ...string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	for _, n := range names {
		if n == "" || strings.Contains(n, "/") {
			return fmt.Errorf("%q is not a snapshot's name", n)
		}
		if err := s.client.RemoveObject(ctx, s.bucket, s.key(n), minio.RemoveObjectOptions{}); err != nil {
			return fmt.Errorf("deleting %s: %w", s.Location(n), describe(err))
		}
	}
	return nil
}

// Prune deletes the oldest snapshots of the folder whose name begins with
// prefix until retention are left, and returns those it deleted.
func (s *S3) Prune(ctx context.Context, prefix string, retention int) ([]Snapshot, error) {
	all, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	var deleted []Snapshot
	for _, old := range oldest(all, prefix, retention) {
		if err := s.Delete(ctx, old.Name); err != nil {
			return deleted, err
		}
		deleted = append(deleted, old)
	}
	return deleted, nil
}

// Download fetches the snapshot name into dir, whole or not at all, and
// returns its path.
func (s *S3) Download(ctx context.Context, name, dir string) (string, error) {
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("%q is not a snapshot's name", name)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	final := filepath.Join(dir, name)
	tmp := final + tmpSuffix
	if err := s.client.FGetObject(ctx, s.bucket, s.key(name), tmp, minio.GetObjectOptions{}); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("downloading %s: %w", s.Location(name), describe(err))
	}
	if err := os.Rename(tmp, final); err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	return final, nil
}
