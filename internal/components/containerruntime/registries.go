package containerruntime

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

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
	// Rewrites map repositories to others on the mirrors: k3s rewrites
	// them in its fork of containerd, which upstream's containerd cannot.
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
		if len(m.Rewrites) > 0 {
			return fmt.Errorf("mirrors.%s.rewrite: not supported: upstream containerd cannot rewrite repositories (k3s does it in a fork)", name)
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

// hostsFiles returns containerd's hosts.toml of each registry r names,
// by the directory it goes in (the registry's host, "_default" for "*").
func (r *Registries) hostsFiles() (map[string][]byte, error) {
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
		// containerd tries the hosts in the file's order: the mirror's.
		for _, e := range r.Mirrors[name].Endpoints {
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
			body, err := toml.Marshal(h)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, "\n[host.%s]\n%s", strconv.Quote(strings.TrimSuffix(u.String(), "/")), body)
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
