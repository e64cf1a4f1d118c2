// Package registries is k3s's registries.yaml: where a node's runtime
// pulls each registry's images from and how it authenticates to them. It
// reads and checks the file, writes it as containerd's hosts.toml files
// (the node's own registry mirror first, when it has one) and the CRI
// plugin's credentials, and gives the node's registry mirror the mirrors
// that rename repositories, which containerd cannot pull from itself.
package registries

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"slices"

	"sigs.k8s.io/yaml"
)

// DefaultPath is where a node reads its registries.yaml unless
// --private-registry names another file; it need not exist.
const DefaultPath = "/etc/kubeboot/registries.yaml"

// Config is k3s's registries.yaml: where the node's runtime pulls each
// registry's images from, and how it authenticates to them.
type Config struct {
	// Mirrors are the endpoints to pull a registry's images from, in
	// order, before the registry itself; "*" is every registry's.
	Mirrors map[string]Mirror `json:"mirrors"`
	// Configs are each registry's or endpoint's (by host[:port]) auth
	// and TLS.
	Configs map[string]HostConfig `json:"configs"`
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

// HostConfig is one registry's or endpoint's auth and TLS.
type HostConfig struct {
	Auth *Auth `json:"auth"`
	TLS  *TLS  `json:"tls"`
}

// Auth are the credentials, as docker's config.json has them.
type Auth struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Auth          string `json:"auth"`
	IdentityToken string `json:"identitytoken"`
}

// TLS is how the endpoint's certificate is verified and which client
// certificate is offered.
type TLS struct {
	CAFile             string `json:"ca_file"`
	CertFile           string `json:"cert_file"`
	KeyFile            string `json:"key_file"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify"`
}

// Read reads and checks the registries.yaml at path: a file that is not
// YAML, names a key registries.yaml does not have, an endpoint that is
// not an http(s) URL or a TLS file that cannot be read is refused, naming
// the file and the key. A missing file is no registries when required is
// false (the default file).
func Read(path string, required bool) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !required {
		return &Config{}, nil
	}
	if err != nil {
		return nil, err
	}
	r := &Config{}
	if err := yaml.UnmarshalStrict(data, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

func (r *Config) validate() error {
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

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
