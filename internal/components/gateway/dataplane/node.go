package dataplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/platform/presence"
)

// GenerationAnnotation on a Node is the generation of the Config the
// node serves: the server gives Gateways and Ingresses the addresses of
// the nodes that serve.
const GenerationAnnotation = "gateway.kubeboot.io/generation"

// Timing of the node's listeners.
const (
	// retryInterval is how soon a port the node could not listen on is
	// tried again.
	retryInterval = 10 * time.Second
	// drainTimeout bounds how long a port no longer served finishes its
	// requests in flight.
	drainTimeout = 10 * time.Second
)

// Node is a node that serves the data plane.
type Node struct {
	// Name is the Node's.
	Name string
	// Client is the node's agent's (nodejoin.AgentUser): it reads the
	// published Config and the EndpointSlices, and annotates its Node.
	Client kubernetes.Interface
	// Address is where the ports listen; invalid: every address of the
	// host.
	Address netip.Addr
}

// Run serves the published Config on the node until ctx is done. Until
// the server publishes one it holds a single watch.
func Run(ctx context.Context, n Node) error {
	logger := klog.FromContext(ctx).WithName("gateway")
	ctx = klog.NewContext(ctx, logger)
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", SecretName).String()
	}
	if err := presence.Wait(ctx, cache.NewFilteredListWatchFromClient(n.Client.CoreV1().RESTClient(), "secrets", Namespace, byName)); err != nil {
		return nil
	}

	published := informers.NewSharedInformerFactoryWithOptions(n.Client, 0, informers.WithNamespace(Namespace),
		informers.WithTweakListOptions(byName))
	slices := informers.NewSharedInformerFactory(n.Client, 0)
	secret := published.Core().V1().Secrets()
	endpointSlices := slices.Discovery().V1().EndpointSlices()
	changed := make(chan struct{}, 1)
	trigger := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := secret.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: trigger,
		UpdateFunc: func(_, obj any) { trigger(obj) }, DeleteFunc: trigger}); err != nil {
		return err
	}
	// Registered, with its index, before the factory starts.
	if err := endpointSlices.Informer().AddIndexers(serviceIndexers()); err != nil {
		return err
	}
	for _, f := range []informers.SharedInformerFactory{published, slices} {
		f.StartWithContext(ctx)
		defer f.Shutdown()
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok && ctx.Err() == nil {
				return fmt.Errorf("the %v informer did not sync", typ)
			}
		}
	}
	s := &servers{node: n, endpoints: sliceEndpoints{endpointSlices.Informer().GetIndexer()}, transport: newTransport(), sockets: map[int32]*socket{}}
	defer s.closeAll()
	held := &holder{node: n.Name}
	defer held.release(ctx)
	served := int64(-1)
	for {
		cfg, err := read(secret.Lister())
		if err != nil {
			logger.Error(err, "Reading the data plane's configuration")
		} else if listening, holding := s.apply(ctx, cfg), held.hold(ctx, cfg); listening && holding && cfg.Generation != served {
			if err := annotate(ctx, n, cfg.Generation); err != nil {
				logger.Error(err, "Reporting the configuration served on the Node")
			} else {
				served = cfg.Generation
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-time.After(retryInterval):
			// A port that could not listen, an address not held, are
			// tried again.
		}
	}
}

// read is the published Config; none (deleted): an empty one.
func read(secrets corelisters.SecretLister) (*Config, error) {
	s, err := secrets.Secrets(Namespace).Get(SecretName)
	if err != nil {
		return &Config{Version: Version}, nil
	}
	return Decode(s.Data[ConfigKey])
}

// annotate reports on the Node that it serves generation.
func annotate(ctx context.Context, n Node, generation int64) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		GenerationAnnotation: strconv.FormatInt(generation, 10)}}})
	if err != nil {
		return err
	}
	_, err = n.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// certIndex finds the TLS configuration of a client's server name (its
// host's certificate, and how it checks the client's), as hosts are
// found: exact, the longest wildcard, then the host for any.
type certIndex struct {
	exact     map[string]*tls.Config
	wildcards []namedConfig
	any       *tls.Config
}

type namedConfig struct {
	suffix string // ".example.com"
	config *tls.Config
}

func indexCertificates(ctx context.Context, p *Port) *certIndex {
	idx := &certIndex{exact: map[string]*tls.Config{}}
	for _, h := range p.Hosts {
		if h.Certificate == nil {
			continue
		}
		cfg, err := hostTLS(&h)
		if err != nil {
			klog.FromContext(ctx).Error(err, "A host's certificate left out", "port", p.Port, "host", h.Hostname)
			continue
		}
		switch name := strings.ToLower(h.Hostname); {
		case name == "" || name == "*":
			idx.any = cfg
		case strings.HasPrefix(name, "*."):
			idx.wildcards = append(idx.wildcards, namedConfig{name[1:], cfg})
		default:
			idx.exact[name] = cfg
		}
	}
	slices.SortStableFunc(idx.wildcards, func(a, b namedConfig) int { return len(b.suffix) - len(a.suffix) })
	return idx
}

// hostTLS is the TLS configuration h's clients get: its certificate,
// HTTP/2 or HTTP/1.1 by ALPN, and its check of their certificates.
func hostTLS(h *Host) (*tls.Config, error) {
	pair, err := tls.X509KeyPair(h.Certificate.Cert, h.Certificate.Key)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2", "http/1.1"}}
	if v := h.ClientValidation; v != nil {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		if v.Optional {
			cfg.ClientAuth = tls.RequestClientCert
		}
		cfg.ClientCAs = x509.NewCertPool()
		if !cfg.ClientCAs.AppendCertsFromPEM(v.CACerts) {
			return nil, fmt.Errorf("the host's client CA certificates hold no certificate")
		}
	}
	return cfg, nil
}

func (idx *certIndex) get(serverName string) (*tls.Config, error) {
	name := strings.ToLower(serverName)
	if c, ok := idx.exact[name]; ok {
		return c, nil
	}
	for _, w := range idx.wildcards {
		if len(name) > len(w.suffix) && strings.HasSuffix(name, w.suffix) {
			return w.config, nil
		}
	}
	if idx.any != nil {
		return idx.any, nil
	}
	return nil, fmt.Errorf("no certificate for %q", serverName)
}

// klogWriter writes net/http's server errors (a client's bad TLS
// handshake) to klog, at a verbosity they do not flood.
type klogWriter struct{ logger klog.Logger }

func (w klogWriter) Write(p []byte) (int, error) {
	w.logger.V(4).Info(strings.TrimSpace(string(p)))
	return len(p), nil
}
