package dataplane

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	endpointSlices.Informer() // registered before the factory starts
	for _, f := range []informers.SharedInformerFactory{published, slices} {
		f.StartWithContext(ctx)
		defer f.Shutdown()
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok && ctx.Err() == nil {
				return fmt.Errorf("the %v informer did not sync", typ)
			}
		}
	}
	s := &servers{node: n, endpoints: sliceEndpoints{endpointSlices.Lister()}, transport: newTransport(), ports: map[int32]*listener{}}
	defer s.closeAll()
	served := int64(-1)
	for {
		cfg, err := read(secret.Lister())
		if err != nil {
			logger.Error(err, "Reading the data plane's configuration")
		} else if failed := s.apply(ctx, cfg); !failed && cfg.Generation != served {
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
			// A port that could not listen is tried again.
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

// servers are the node's listening ports.
type servers struct {
	node      Node
	endpoints Endpoints
	transport http.RoundTripper
	ports     map[int32]*listener
}

// listener is one port served.
type listener struct {
	tls     bool
	handler *handler
	srv     *http.Server
	certs   sync.Map // "certs" -> *certIndex
}

// apply makes the node serve cfg: a port listens once, each its routes
// swapped whole; a port no longer in cfg finishes its requests and
// closes. It reports whether a port could not listen.
func (s *servers) apply(ctx context.Context, cfg *Config) (failed bool) {
	logger := klog.FromContext(ctx)
	want := map[int32]bool{}
	for i := range cfg.Ports {
		p := &cfg.Ports[i]
		want[p.Port] = true
		l := s.ports[p.Port]
		if l != nil && l.tls != p.TLS {
			s.close(p.Port)
			l = nil
		}
		if l == nil {
			var err error
			if l, err = s.listen(ctx, p); err != nil {
				logger.Error(err, "The node cannot serve a port of its Gateways or Ingresses; tried again", "port", p.Port)
				failed = true
				continue
			}
			s.ports[p.Port] = l
		}
		routes, errs := compile(p)
		for _, err := range errs {
			logger.Error(err, "A route left out", "port", p.Port)
		}
		l.handler.routes.Store(routes)
		if p.TLS {
			l.certs.Store("certs", indexCertificates(ctx, p))
		}
	}
	for port := range s.ports {
		if !want[port] {
			s.close(port)
		}
	}
	return failed
}

// listen starts serving p.
func (s *servers) listen(ctx context.Context, p *Port) (*listener, error) {
	addr := ""
	if s.node.Address.IsValid() {
		addr = s.node.Address.String()
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(int(p.Port))))
	if err != nil {
		return nil, err
	}
	l := &listener{tls: p.TLS, handler: newHandler(p.Port, p.TLS, s.endpoints, s.transport)}
	l.srv = &http.Server{
		Handler:           l.handler,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          log.New(klogWriter{klog.FromContext(ctx)}, "", 0),
	}
	if p.TLS {
		l.srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			idx, _ := l.certs.Load("certs")
			if idx == nil {
				return nil, errors.New("no certificate")
			}
			return idx.(*certIndex).get(hello.ServerName)
		}}
	}
	go func() {
		var err error
		if p.TLS {
			err = l.srv.ServeTLS(ln, "", "")
		} else {
			err = l.srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Serving a port stopped", "port", p.Port)
		}
	}()
	klog.FromContext(ctx).Info("Serving a port of the cluster's Gateways and Ingresses", "port", p.Port, "tls", p.TLS)
	return l, nil
}

// close stops serving port: its requests in flight finish first.
func (s *servers) close(port int32) {
	l := s.ports[port]
	delete(s.ports, port)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		_ = l.srv.Shutdown(ctx)
	}()
}

func (s *servers) closeAll() {
	for port := range s.ports {
		s.close(port)
	}
}

// certIndex finds the certificate of a TLS client's server name, as
// hosts are found: exact, the longest wildcard, then the host for any.
type certIndex struct {
	exact     map[string]*tls.Certificate
	wildcards []namedCert
	any       *tls.Certificate
}

type namedCert struct {
	suffix string // ".example.com"
	cert   *tls.Certificate
}

func indexCertificates(ctx context.Context, p *Port) *certIndex {
	idx := &certIndex{exact: map[string]*tls.Certificate{}}
	for _, h := range p.Hosts {
		if h.Certificate == nil {
			continue
		}
		pair, err := tls.X509KeyPair(h.Certificate.Cert, h.Certificate.Key)
		if err != nil {
			klog.FromContext(ctx).Error(err, "A host's certificate left out", "port", p.Port, "host", h.Hostname)
			continue
		}
		switch name := strings.ToLower(h.Hostname); {
		case name == "" || name == "*":
			idx.any = &pair
		case strings.HasPrefix(name, "*."):
			idx.wildcards = append(idx.wildcards, namedCert{name[1:], &pair})
		default:
			idx.exact[name] = &pair
		}
	}
	slices.SortStableFunc(idx.wildcards, func(a, b namedCert) int { return len(b.suffix) - len(a.suffix) })
	return idx
}

func (idx *certIndex) get(serverName string) (*tls.Certificate, error) {
	name := strings.ToLower(serverName)
	if c, ok := idx.exact[name]; ok {
		return c, nil
	}
	for _, w := range idx.wildcards {
		if len(name) > len(w.suffix) && strings.HasSuffix(name, w.suffix) {
			return w.cert, nil
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
