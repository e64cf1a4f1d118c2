package registries

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/core/remotes/docker"
)

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
func (r *Config) Rewrites() (map[string]*Rewrite, error) {
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
func (r *Config) tlsConfig(host string) (*tls.Config, error) {
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
func (r *Config) credentials(host string) (string, string, error) {
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
