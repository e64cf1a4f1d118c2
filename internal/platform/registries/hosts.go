package registries

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

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
func (r *Config) Mirrored() []string { return sortedKeys(r.Mirrors) }

// HostsFiles returns containerd's hosts.toml of each registry r names,
// by the directory it goes in (the registry's host, "_default" for "*");
// local, if not nil, is the first endpoint of each registry mirrored.
func (r *Config) HostsFiles(local *LocalMirror) (map[string][]byte, error) {
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

// Auths are the credentials of each registry or endpoint host, for the
// CRI plugin's registry.configs.
func (r *Config) Auths() map[string]any {
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
