package envtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/kubeboot/kubeboot/internal/platform/manifests"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// WebhookInstallOptions are envtest's options for installing webhooks,
// field for field: the webhook configurations in Paths, MutatingWebhooks
// and ValidatingWebhooks are pointed at a local server (LocalServingHost
// and LocalServingPort, filled in when empty) whose serving certificate
// and key, tls.crt and tls.key, are generated in LocalServingCertDir and
// trusted through LocalServingCAData.
type WebhookInstallOptions struct {
	// Paths are files or directories of webhook configurations (.yaml,
	// .yml, .json); documents of other kinds are skipped.
	Paths []string
	// MutatingWebhooks are MutatingWebhookConfigurations to install.
	MutatingWebhooks []*admissionv1.MutatingWebhookConfiguration
	// ValidatingWebhooks are ValidatingWebhookConfigurations to install.
	ValidatingWebhooks []*admissionv1.ValidatingWebhookConfiguration
	// IgnoreSchemeConvertible points every CRD's conversion webhook at the
	// local server, not only those of kinds the scheme knows as
	// convertible.
	IgnoreSchemeConvertible bool
	// IgnoreErrorIfPathMissing skips a missing path instead of failing.
	IgnoreErrorIfPathMissing bool

	// LocalServingHost is where the test's webhook server listens.
	// Default: 127.0.0.1.
	LocalServingHost string
	// LocalServingPort is its port. Default: a free one in 20000-32767,
	// below the ranges the system hands out for port 0.
	LocalServingPort int
	// LocalServingCertDir holds tls.crt and tls.key for the webhook
	// server. Default: a directory Stop removes.
	LocalServingCertDir string
	// LocalServingCAData is the CA that signed the serving certificate,
	// set in the webhooks' caBundle.
	LocalServingCAData []byte
	// LocalServingHostExternalName is the host the apiserver calls, if not
	// LocalServingHost.
	LocalServingHostExternalName string

	// MaxTime and PollInterval are envtest's bounds for waiting on the
	// configurations; kubeboot's Install returns once they are stored, so
	// they are unused.
	MaxTime      time.Duration
	PollInterval time.Duration
}

// PrepWithoutInstalling generates the certificates, chooses the host and
// port, reads Paths and points every webhook at the local server, without
// installing anything.
func (o *WebhookInstallOptions) PrepWithoutInstalling() error {
	if o.LocalServingHost == "" {
		o.LocalServingHost = "127.0.0.1"
	}
	if o.LocalServingPort == 0 {
		port, err := freePort(o.LocalServingHost)
		if err != nil {
			return fmt.Errorf("choosing a port for the webhook server: %w", err)
		}
		o.LocalServingPort = port
	}
	if err := o.generateCertificates(); err != nil {
		return err
	}
	if err := o.readPaths(); err != nil {
		return err
	}
	return o.ModifyWebhookDefinitions()
}

// ModifyWebhookDefinitions points the webhooks at the local server: the
// CA bundle, and a URL instead of a Service reference.
func (o *WebhookInstallOptions) ModifyWebhookDefinitions() error {
	base := "https://" + o.hostPort()
	point := func(cc *admissionv1.WebhookClientConfig) {
		cc.CABundle = o.LocalServingCAData
		if cc.Service != nil && cc.Service.Path != nil {
			url := base + "/" + strings.TrimPrefix(*cc.Service.Path, "/")
			cc.URL, cc.Service = &url, nil
		}
	}
	for _, hook := range o.MutatingWebhooks {
		for i := range hook.Webhooks {
			point(&hook.Webhooks[i].ClientConfig)
		}
	}
	for _, hook := range o.ValidatingWebhooks {
		for i := range hook.Webhooks {
			point(&hook.Webhooks[i].ClientConfig)
		}
	}
	return nil
}

// Install prepares the webhooks if PrepWithoutInstalling has not, then
// creates (or updates) their configurations.
func (o *WebhookInstallOptions) Install(config *rest.Config) error {
	if len(o.LocalServingCAData) == 0 {
		if err := o.PrepWithoutInstalling(); err != nil {
			return err
		}
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx := context.Background()
	mutating := client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	for _, hook := range o.MutatingWebhooks {
		if err := createOrUpdate(ctx, hook, mutating.Create, mutating.Get, mutating.Update); err != nil {
			return fmt.Errorf("MutatingWebhookConfiguration %s: %w", hook.Name, err)
		}
	}
	validating := client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	for _, hook := range o.ValidatingWebhooks {
		if err := createOrUpdate(ctx, hook, validating.Create, validating.Get, validating.Update); err != nil {
			return fmt.Errorf("ValidatingWebhookConfiguration %s: %w", hook.Name, err)
		}
	}
	return nil
}

// Cleanup removes the serving certificates.
func (o *WebhookInstallOptions) Cleanup() error {
	if o.LocalServingCertDir == "" {
		return nil
	}
	return os.RemoveAll(o.LocalServingCertDir)
}

func (o *WebhookInstallOptions) hostPort() string {
	host := o.LocalServingHostExternalName
	if host == "" {
		host = o.LocalServingHost
	}
	return net.JoinHostPort(host, strconv.Itoa(o.LocalServingPort))
}

// generateCertificates writes a CA and a serving certificate for the
// local host in LocalServingCertDir (a new temporary directory if empty).
func (o *WebhookInstallOptions) generateCertificates() error {
	if o.LocalServingCertDir == "" {
		dir, err := os.MkdirTemp("", "kubeboot-webhook-certs-")
		if err != nil {
			return fmt.Errorf("webhook serving certificates: %w", err)
		}
		o.LocalServingCertDir = dir
	}
	ca, err := pki.EnsureCA(o.LocalServingCertDir, "kubeboot-envtest-webhook-ca")
	if err != nil {
		return fmt.Errorf("webhook CA: %w", err)
	}
	spec := pki.ServingSpec{CommonName: "envtest-webhook", DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}
	for _, host := range []string{o.LocalServingHost, o.LocalServingHostExternalName} {
		if ip := net.ParseIP(host); ip != nil {
			spec.IPs = append(spec.IPs, ip)
		} else if host != "" {
			spec.DNSNames = append(spec.DNSNames, host)
		}
	}
	serving, err := pki.NewServing(ca, spec)
	if err != nil {
		return fmt.Errorf("webhook serving certificate: %w", err)
	}
	for name, data := range map[string][]byte{"tls.crt": serving.CertPEM, "tls.key": serving.KeyPEM} {
		if err := pki.WriteFile(filepath.Join(o.LocalServingCertDir, name), data, 0o600); err != nil {
			return fmt.Errorf("webhook serving certificate: %w", err)
		}
	}
	o.LocalServingCAData = ca.CertPEM
	return nil
}

// readPaths adds the webhook configurations of Paths.
func (o *WebhookInstallOptions) readPaths() error {
	var errs []error
	for _, path := range o.Paths {
		files, err := manifests.Files(path)
		if errors.Is(err, os.ErrNotExist) && o.IgnoreErrorIfPathMissing {
			klog.InfoS("Skipping a missing webhook path", "path", path)
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("webhook path: %w", err))
			continue
		}
		for _, file := range files {
			if err := o.readFile(file); err != nil {
				errs = append(errs, fmt.Errorf("webhook path: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// readFile adds the webhook configurations of one file; documents of
// other kinds are skipped.
func (o *WebhookInstallOptions) readFile(file string) error {
	docs, err := manifests.ReadFile(file)
	if err != nil {
		return err
	}
	for _, doc := range docs {
		if doc.APIVersion != admissionv1.SchemeGroupVersion.String() {
			continue
		}
		switch doc.Kind {
		case "MutatingWebhookConfiguration":
			hook := &admissionv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc.Data, hook); err != nil {
				return fmt.Errorf("%s: %w", doc.Source, err)
			}
			o.MutatingWebhooks = append(o.MutatingWebhooks, hook)
		case "ValidatingWebhookConfiguration":
			hook := &admissionv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc.Data, hook); err != nil {
				return fmt.Errorf("%s: %w", doc.Source, err)
			}
			o.ValidatingWebhooks = append(o.ValidatingWebhooks, hook)
		}
	}
	return nil
}

// createOrUpdate creates obj, or updates the object of its name.
func createOrUpdate[T metav1.Object](ctx context.Context, obj T,
	create func(context.Context, T, metav1.CreateOptions) (T, error),
	get func(context.Context, string, metav1.GetOptions) (T, error),
	update func(context.Context, T, metav1.UpdateOptions) (T, error),
) error {
	_, err := create(ctx, obj, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	cur, err := get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	obj.SetResourceVersion(cur.GetResourceVersion())
	_, err = update(ctx, obj, metav1.UpdateOptions{})
	return err
}

// Webhook ports are chosen in [portsFrom, portsTo): below the ephemeral
// ranges (Linux's default 32768-60999, macOS's and Windows' 49152-65535)
// from which bind(0), as every kubeboot server listens, and outgoing
// connections take theirs. A port that was free when chosen cannot then
// go to a server started a moment later, before the webhook server
// listens on it.
const portsFrom, portsTo = 20000, 32768

var (
	portsMu sync.Mutex
	// portsChosen are the ports freePort handed out in this process.
	portsChosen = map[int]bool{}
)

// freePort returns a port free on host, below the ephemeral range, never
// the same twice in a process.
func freePort(host string) (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 200 {
		port := portsFrom + rand.IntN(portsTo-portsFrom)
		if portsChosen[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			continue
		}
		_ = l.Close()
		portsChosen[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free port on %s in %d-%d", host, portsFrom, portsTo-1)
}
