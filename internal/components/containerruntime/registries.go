package containerruntime

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/pelletier/go-toml/v2"
	"sigs.k8s.io/yaml"
)

// DefaultPrivateRegistry is where a node reads its registries.yaml unless
// --private-registry names another file; it need not exist.
const DefaultPrivateRegistry = "/etc/kubeboot/registries.yaml"

// Registries is k3s's registries.yaml: where the node's runtime pulls
// each registry's images from, and how it authenticates to them.
type Registries struct {
	// Mirrors are the endpoints to pull a registry's images from, in
	// order, before the registry itself; "*" is every registry's.
	Mirrors map[string]Mirror `json:"mirrors"`
	// Configs are each registry's or endpoint's (by host[:port]) auth
	// and TLS.
	Configs map[string]RegistryConfig `json:"configs"`
}

// Mirror is one registry's mirrors.
type Mirror struct {
	// Endpoints are the mirrors' URLs (https://host[:port][/path]).
	Endpoints []string `json:"endpoint"`
	// Rewrites rename repositories on the mirrors: a regular expression
	// and its replacement ($1 ...). Upstream containerd cannot, so the
	// node's registry mirror pulls from these endpoints for it (Rewrite).
	Rewrites map[string]string `json:"rewrite"`
}

// RegistryConfig is one registry's or endpoint's auth and TLS.
type RegistryConfig struct {
	Auth *RegistryAuth `json:"auth"`
	TLS  *RegistryTLS  `json:"tls"`
}

// RegistryAuth are the credentials, as docker's config.json has them.
type RegistryAuth struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Auth          string `json:"auth"`
	IdentityToken string `json:"identitytoken"`
}

// RegistryTLS is how the endpoint's certificate is verified and which
// client certificate is offered.
type RegistryTLS struct {
	CAFile             string `json:"ca_file"`
	CertFile           string `json:"cert_file"`
	KeyFile            string `json:"key_file"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify"`
}

// ReadRegistries reads and checks the registries.yaml at path: a file that
// is not YAML, names a key registries.yaml does not have, an endpoint
// that is not an http(s) URL or a TLS file that cannot be read is refused,
// naming the file and the key. A missing file is no registries when
// required is false (the default file).
func ReadRegistries(path string, required bool) (*Registries, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !required {
		return &Registries{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--private-registry: %w", err)
	}
	r := &Registries{}
	if err := yaml.UnmarshalStrict(data, r); err != nil {
		return nil, fmt.Errorf("--private-registry %s: %w", path, err)
	}
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("--private-registry %s: %w", path, err)
	}
	return r, nil
}

func (r *Registries) validate() error {
	for _, name := range sortedKeys(r.Mirrors) {
		m := r.Mirrors[name]
		if name != "*" && !validHost(name) {
			return fmt.Errorf("mirrors: %q is not a registry's host[:port]", name)
		}
		if len(m.Rewrites) > 0 && len(m.Endpoints) == 0 {
			return fmt.Errorf("mirrors.%s.rewrite: rewrites apply to the mirror's endpoints, and it has none", name)
		}
		for _, pattern := range sortedKeys(m.Rewrites) {
			if _, err := regexp.Compile(pattern); err != nil {
				return fmt.Errorf("mirrors.%s.rewrite[%q]: %w", name, pattern, err)
			}
		}
		for i, e := range m.Endpoints {
			if _, err := parseEndpoint(e); err != nil {
				return fmt.Errorf("mirrors.%s.endpoint[%d]: %w", name, i, err)
			}
		}
	}
	for _, host := range sortedKeys(r.Configs) {
		if !validHost(host) {
			return fmt.Errorf("configs: %q is not a registry's host[:port]", host)
		}
		tls := r.Configs[host].TLS
		if tls == nil {
			continue
		}
		if (tls.CertFile == "") != (tls.KeyFile == "") {
			return fmt.Errorf("configs.%s.tls: cert_file and key_file go together", host)
		}
		for key, file := range map[string]string{"ca_file": tls.CAFile, "cert_file": tls.CertFile, "key_file": tls.KeyFile} {
			if file == "" {
				continue
			}
			if _, err := os.Stat(file); err != nil {
				return fmt.Errorf("configs.%s.tls.%s: %w", host, key, err)
			}
		}
	}
	return nil
}

// validHost reports whether s is a registry's host[:port].
func validHost(s string) bool {
	u, err := url.Parse("https://" + s)
	return err == nil && u.Host == s && s != ""
}

// parseEndpoint parses a mirror's URL.
func parseEndpoint(e string) (*url.URL, error) {
	u, err := url.Parse(e)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%q: want http(s)://host[:port][/path]", e)
	}
	return u, nil
}

// defaultServers are the registries whose API is not at their name.
var defaultServers = map[string]string{"docker.io": "https://registry-1.docker.io"}

// LocalMirror is the node's registry mirror (registrymirror): the first
// endpoint of every registry registries.yaml mirrors, when it asks the
// other nodes (Peers, the embedded registry mirror), and the only one
// besides the registry itself of a registry whose mirrors rewrite
// repositories (it pulls from them for containerd).
type LocalMirror struct {
	// URL is its https://host:port, CAFile the CA its certificate is
	// verified against, ClientCertFile the certificate and key (one PEM
	// file) containerd presents to it.
	URL, CAFile, ClientCertFile string
	// Peers says it asks the other nodes.
	Peers bool
}

// Mirrored are the registries r lists under mirrors ("*": every one).
func (r *Registries) Mirrored() []string { return sortedKeys(r.Mirrors) }

// hostsFiles returns containerd's hosts.toml of each registry r names,
// by the directory it goes in (the registry's host, "_default" for "*");
// local, if not nil, is the first endpoint of each registry mirrored.
func (r *Registries) hostsFiles(local *LocalMirror) (map[string][]byte, error) {
	files := map[string][]byte{}
	type table = map[string]any
	tlsOf := func(host string, t table) {
		c, ok := r.Configs[host]
		if !ok || c.TLS == nil {
			return
		}
		if c.TLS.CAFile != "" {
			t["ca"] = c.TLS.CAFile
		}
		if c.TLS.CertFile != "" {
			t["client"] = [][]string{{c.TLS.CertFile, c.TLS.KeyFile}}
		}
		if c.TLS.InsecureSkipVerify {
			t["skip_verify"] = true
		}
	}
	registries := sortedKeys(r.Mirrors)
	for _, host := range sortedKeys(r.Configs) {
		if !slices.Contains(registries, host) {
			registries = append(registries, host)
		}
	}
	for _, name := range registries {
		doc := table{}
		dir := name
		if name == "*" {
			dir = "_default"
		} else {
			server := "https://" + name
			if s, ok := defaultServers[name]; ok {
				server = s
			}
			doc["server"] = server
			tlsOf(name, doc)
		}
		var b bytes.Buffer
		top, err := toml.Marshal(doc)
		if err != nil {
			return nil, err
		}
		b.Write(top)
		// containerd tries the hosts in the file's order: the node's own
		// mirror, which asks the other nodes, then registries.yaml's.
		// A registry without mirrors of its own has "*"'s, which
		// containerd would not give one with a directory of its own.
		mirror, mirrored := r.Mirrors[name]
		if !mirrored {
			mirror, mirrored = r.Mirrors["*"]
		}
		var hosts []string
		var tables []table
		rewritten := len(mirror.Rewrites) > 0
		if local != nil && (rewritten || mirrored && local.Peers) {
			hosts = append(hosts, local.URL)
			tables = append(tables, table{"capabilities": []string{"pull", "resolve"}, "ca": local.CAFile, "client": local.ClientCertFile})
		}
		endpoints := mirror.Endpoints
		if rewritten {
			// The local mirror pulls from them, renaming; the registry
			// itself is asked by its own names, as k3s does.
			endpoints = nil
		}
		for _, e := range endpoints {
			u, err := parseEndpoint(e)
			if err != nil {
				return nil, err
			}
			h := table{"capabilities": []string{"pull", "resolve"}}
			if p := strings.TrimSuffix(u.Path, "/"); p != "" {
				// A path of its own is the mirror's API root.
				h["override_path"] = true
			}
			tlsOf(u.Host, h)
			hosts = append(hosts, strings.TrimSuffix(u.String(), "/"))
			tables = append(tables, h)
		}
		for i, h := range tables {
			body, err := toml.Marshal(h)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, "\n[host.%s]\n%s", strconv.Quote(hosts[i]), body)
		}
		files[dir] = b.Bytes()
	}
	return files, nil
}

// auths are the credentials of each registry or endpoint host, for the
// CRI plugin's registry.configs.
func (r *Registries) auths() map[string]any {
	auths := map[string]any{}
	for host, c := range r.Configs {
		if c.Auth == nil {
			continue
		}
		auths[host] = map[string]any{"auth": map[string]string{
			"username": c.Auth.Username, "password": c.Auth.Password,
			"auth": c.Auth.Auth, "identitytoken": c.Auth.IdentityToken,
		}}
	}
	return auths
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Rewrite is a registry's mirrors whose repositories have other names:
// the node's registry mirror pulls from them for containerd, renaming.
type Rewrite struct {
	// rules are the renames, in the patterns' order; the first that
	// matches applies.
	rules []rewriteRule
	// Hosts are the mirrors' endpoints, as containerd's resolver takes
	// them: with each one's TLS and credentials from registries.yaml.
	Hosts docker.RegistryHosts
}

type rewriteRule struct {
	pattern     *regexp.Regexp
	replacement string
}

// Apply returns repository as the mirrors name it.
func (rw *Rewrite) Apply(repository string) string {
	for _, r := range rw.rules {
		if r.pattern.MatchString(repository) {
			return r.pattern.ReplaceAllString(repository, r.replacement)
		}
	}
	return repository
}

// Rewrites are the registries whose mirrors rewrite repositories, by
// name.
func (r *Registries) Rewrites() (map[string]*Rewrite, error) {
	rewrites := map[string]*Rewrite{}
	for _, name := range sortedKeys(r.Mirrors) {
		m := r.Mirrors[name]
		if len(m.Rewrites) == 0 {
			continue
		}
		rw := &Rewrite{}
		for _, pattern := range sortedKeys(m.Rewrites) {
			re, err := regexp.Compile(pattern)
			if err != nil {
				return nil, fmt.Errorf("mirrors.%s.rewrite[%q]: %w", name, pattern, err)
			}
			rw.rules = append(rw.rules, rewriteRule{re, m.Rewrites[pattern]})
		}
		var hosts []docker.RegistryHost
		for i, e := range m.Endpoints {
			u, err := parseEndpoint(e)
			if err != nil {
				return nil, fmt.Errorf("mirrors.%s.endpoint[%d]: %w", name, i, err)
			}
			tlsConfig, err := r.tlsConfig(u.Host)
			if err != nil {
				return nil, err
			}
			client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: tlsConfig,
				TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 30 * time.Second}}
			path := "/v2"
			if p := strings.TrimSuffix(u.Path, "/"); p != "" {
				path = p
			}
			hosts = append(hosts, docker.RegistryHost{
				Client:       client,
				Authorizer:   docker.NewDockerAuthorizer(docker.WithAuthClient(client), docker.WithAuthCreds(r.credentials)),
				Host:         u.Host,
				Scheme:       u.Scheme,
				Path:         path,
				Capabilities: docker.HostCapabilityPull | docker.HostCapabilityResolve,
			})
		}
		rw.Hosts = func(string) ([]docker.RegistryHost, error) { return hosts, nil }
		rewrites[name] = rw
	}
	return rewrites, nil
}

// tlsConfig is how the endpoint at host is verified and which client
// certificate is offered to it.
func (r *Registries) tlsConfig(host string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	t := r.Configs[host].TLS
	if t == nil {
		return c, nil
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("configs.%s.tls.ca_file: %w", host, err)
		}
		if c.RootCAs, err = x509.SystemCertPool(); err != nil {
			c.RootCAs = x509.NewCertPool()
		}
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("configs.%s.tls.ca_file %s: no certificate", host, t.CAFile)
		}
	}
	if t.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("configs.%s.tls: %w", host, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	c.InsecureSkipVerify = t.InsecureSkipVerify
	return c, nil
}

// credentials are the username and secret for host, as containerd's CRI
// plugin reads registry.configs: an identity token, else the base64
// user:password of auth, else username and password.
func (r *Registries) credentials(host string) (string, string, error) {
	a := r.Configs[host].Auth
	switch {
	case a == nil:
		return "", "", nil
	case a.IdentityToken != "":
		return "", a.IdentityToken, nil
	case a.Auth != "":
		decoded, err := base64.StdEncoding.DecodeString(a.Auth)
		if err != nil {
			return "", "", fmt.Errorf("configs.%s.auth.auth: not base64", host)
		}
		user, password, ok := strings.Cut(string(decoded), ":")
		if !ok {
			return "", "", fmt.Errorf("configs.%s.auth.auth: not user:password", host)
		}
		return user, password, nil
	}
	return a.Username, a.Password, nil
}
