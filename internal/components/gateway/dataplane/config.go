// Package dataplane is the nodes' part of kubeboot's Gateways and
// Ingresses: what every node serves, as the server's gateway component
// publishes it (Config, in one Secret), and the node's listeners that
// serve it (Run): each request matched by port, host and route, its
// filters applied, and proxied to a ready endpoint of its backend Service
// (the node's own EndpointSlice informer), with Go's net/http.
//
// The server decides everything a Gateway API controller decides (which
// routes attach where, in which order they take precedence, which
// certificate a host presents): a node only matches in the published
// order, so that every node serves the same.
package dataplane

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Version is the Config format's; a node refuses a Config of another (and
// serves what it served): 2 added Port.Passthrough, which a node of
// format 1 would serve as HTTP, and Port.Address; 3 added Backend.TLS,
// Host.ClientValidation, the hosts of Passthrough ports that terminate
// TLS and Route.SessionPersistence, which a node of format 2 would serve
// in the clear, not check, pass through or not keep.
const Version = 3

// The published Config: one Secret, its gzipped JSON under ConfigKey,
// which the nodes' agents may read (and no other Secret).
const (
	Namespace  = "kube-system"
	SecretName = "kubeboot-gateway-dataplane"
	ConfigKey  = "config.json.gz"
)

// Config is what every node serves.
type Config struct {
	Version int `json:"version"`
	// Generation counts the Configs published; a node reports the one it
	// serves (GenerationAnnotation).
	Generation int64 `json:"generation"`
	// Ports are the ports to serve, each address and port once.
	Ports []Port `json:"ports,omitempty"`
	// Pool is the range of the Gateways' own addresses
	// (--gateway-addresses), if any: a node holds on its network the
	// ones Announce gives it, and none other of the pool.
	Pool *AddressRange `json:"pool,omitempty"`
	// Announce are the Gateways' own addresses, each with the node that
	// holds it (and so answers for it on its network).
	Announce []Announcement `json:"announce,omitempty"`
}

// AddressRange is a range of addresses, First to Last.
type AddressRange struct {
	First netip.Addr `json:"first"`
	Last  netip.Addr `json:"last"`
}

// Contains reports whether a is in r.
func (r AddressRange) Contains(a netip.Addr) bool {
	return r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

func (r AddressRange) String() string { return r.First.String() + "-" + r.Last.String() }

// Announcement is a Gateway's own address and the node that holds it.
type Announcement struct {
	Address netip.Addr `json:"address"`
	Node    string     `json:"node"`
}

// Port is one port of the nodes and what it serves.
type Port struct {
	// Address is the Gateway's own address the port serves (connections
	// to it); invalid: the nodes' own addresses, where every Gateway
	// without an address of its own and the Ingresses are served.
	Address netip.Addr `json:"address,omitzero"`
	Port    int32      `json:"port"`
	// TLS says the port terminates TLS: HTTPS.
	TLS bool `json:"tls,omitempty"`
	// Passthrough says the port serves TLS connections to the backends
	// as streams (TLS listeners): the server name a client asks for (SNI)
	// chooses the host and the route, whose Match is not used. A host
	// with a Certificate ends the TLS session (mode Terminate) and passes
	// the stream it carries; one without passes the connection through as
	// it came (mode Passthrough).
	Passthrough bool `json:"passthrough,omitempty"`
	// Hosts are the listeners' hostnames. A request is served by the
	// most specific one its host matches (an exact name, then the longest
	// wildcard, then ""), and only by its routes: a Gateway's listeners
	// are isolated.
	Hosts []Host `json:"hosts"`
}

// Host is the listeners of a port with one hostname, and their routes.
type Host struct {
	// Hostname is an exact name ("foo.example.com"), a wildcard that
	// matches one or more labels in front of its suffix
	// ("*.example.com"), or "" for any host.
	Hostname string `json:"hostname,omitempty"`
	// Certificate is presented to clients that ask for the hostname (SNI)
	// on a TLS port; nil on a plain one, and on a Passthrough port's
	// hosts that pass TLS through.
	Certificate *Certificate `json:"certificate,omitempty"`
	// ClientValidation is how the clients that ask for the hostname must
	// prove who they are (a Gateway's tls.frontend); nil: they need not.
	ClientValidation *ClientValidation `json:"clientValidation,omitempty"`
	// Routes in precedence order. Of the routes whose hostnames match the
	// request's most specifically (as Hosts are chosen; a route without
	// hostnames takes any of the host's), the first whose match matches
	// serves.
	Routes []Route `json:"routes,omitempty"`
}

// Certificate is a certificate chain and its key, PEM.
type Certificate struct {
	Cert []byte `json:"cert"`
	Key  []byte `json:"key"`
}

// ClientValidation is a TLS host's validation of its clients'
// certificates.
type ClientValidation struct {
	// CACerts are the certificates, PEM, a client's must chain to.
	CACerts []byte `json:"caCerts"`
	// Optional says a client without a valid certificate is served too
	// (the mode AllowInsecureFallback): its certificate, if any, is asked
	// for and not checked.
	Optional bool `json:"optional,omitempty"`
}

// Route is one match of a route rule and what serves it.
type Route struct {
	// Name says where the route comes from, in logs: "HTTPRoute ns/name
	// rule 0", "Ingress ns/name".
	Name string `json:"name"`
	// Hostnames are the route's, within its host's (exact names or
	// wildcards); none: any of the host's.
	Hostnames []string `json:"hostnames,omitempty"`
	// Match, with every default filled in (a path of type PathPrefix "/",
	// match types Exact).
	Match gatewayv1.HTTPRouteMatch `json:"match"`
	// Filters apply in order: header modifiers, a redirect (which answers
	// at once), a rewrite.
	Filters []gatewayv1.HTTPRouteFilter `json:"filters,omitempty"`
	// Backends share the requests by weight. None: the route answers 500
	// (its references did not resolve), unless a redirect answers.
	Backends []Backend `json:"backends,omitempty"`
	// Mirrors get a copy of a share of the requests (RequestMirror
	// filters), their answers dropped.
	Mirrors []Mirror `json:"mirrors,omitempty"`
	// Timeouts are the rule's: Request bounds the whole request,
	// BackendRequest each try of a backend (504 when one passes); "0s":
	// none.
	Timeouts *gatewayv1.HTTPRouteTimeouts `json:"timeouts,omitempty"`
	// Retry is the rule's: a try answered with one of its codes (or that
	// could not connect) is tried again, up to Attempts more times,
	// Backoff apart, if the request's body is small enough to send again.
	Retry *gatewayv1.HTTPRouteRetry `json:"retry,omitempty"`
	// SessionPersistence is the rule's: a client's requests after its
	// first go to the endpoint that served it, while it is ready, as the
	// session cookie (or header) the node gave it says.
	SessionPersistence *gatewayv1.SessionPersistence `json:"sessionPersistence,omitempty"`
}

// Mirror is a RequestMirror filter's backend and the share of the
// requests it copies there.
type Mirror struct {
	Backend Backend `json:"backend"`
	// Percent of the requests copied, 0 to 100.
	Percent float64 `json:"percent"`
}

// Backend is a Service port the route sends requests to.
type Backend struct {
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	// Port is the Service's port, PortName its name (EndpointSlices name
	// their ports so), TargetPort its number where it has no name and
	// the Service names no port.
	Port     int32  `json:"port"`
	PortName string `json:"portName,omitempty"`
	Weight   int32  `json:"weight"`
	// Protocol is how the backend is spoken to: "" HTTP/1.1,
	// ProtocolH2C HTTP/2 in the clear (a GRPCRoute's, or a port whose
	// appProtocol is kubernetes.io/h2c).
	Protocol string `json:"protocol,omitempty"`
	// Filters are the backendRef's own, applied after the route's to the
	// requests it gets: header modifiers.
	Filters []gatewayv1.HTTPRouteFilter `json:"filters,omitempty"`
	// Invalid is a reference that did not resolve (a missing Service, a
	// cross-namespace one no ReferenceGrant allows), or a Service whose
	// BackendTLSPolicy is not valid: its share of the requests gets 500.
	Invalid bool `json:"invalid,omitempty"`
	// TLS says the backend is spoken to over TLS, and how its certificate
	// is checked (its BackendTLSPolicy); nil: in the clear.
	TLS *BackendTLS `json:"tls,omitempty"`
}

// BackendTLS is how a node connects to a backend over TLS.
type BackendTLS struct {
	// ServerName is asked for (SNI) and, without SubjectAltNames, is the
	// name the backend's certificate must have.
	ServerName string `json:"serverName"`
	// CACerts are the certificates, PEM, the backend's must chain to;
	// none: the node's system roots.
	CACerts []byte `json:"caCerts,omitempty"`
	// SubjectAltNames, if any, are the names of which the backend's
	// certificate must have one: DNS names (exact, or a wildcard's
	// matching one label) or URIs ("spiffe://...").
	SubjectAltNames []SubjectAltName `json:"subjectAltNames,omitempty"`
	// ClientCertificate is presented to the backend, if it asks: the
	// Gateway's tls.backend.clientCertificateRef.
	ClientCertificate *Certificate `json:"clientCertificate,omitempty"`

	// rt is the node's transport for it (tlsTransports.bind), err why it
	// has none.
	rt  http.RoundTripper
	err error
}

// SubjectAltName is a DNS name or a URI a certificate may have.
type SubjectAltName struct {
	Hostname string `json:"hostname,omitempty"`
	URI      string `json:"uri,omitempty"`
}

// ProtocolH2C is a Backend's Protocol for HTTP/2 in the clear.
const ProtocolH2C = "h2c"

// Encode returns c as the Secret holds it.
func Encode(c *Config) ([]byte, error) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if err := json.NewEncoder(zw).Encode(c); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Decode reads a Config Encode wrote, refusing another format's.
func Decode(data []byte) (*Config, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	c := &Config{}
	if err := json.Unmarshal(raw, c); err != nil {
		return nil, err
	}
	if c.Version != Version {
		return nil, fmt.Errorf("the data plane's configuration is of format %d; this node serves format %d", c.Version, Version)
	}
	return c, nil
}
