package registries

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/remotes/docker/config"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// TestHostsFiles reads the hosts.toml files back with containerd's own
// loader and checks the endpoints it tries for each registry, in order:
// the node's embedded mirror first for the registries mirrored, then
// registries.yaml's mirrors, then the registry.
func TestHostsFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.EnsureCA(dir, "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	client, err := pki.NewClient(ca, "system:node:n", []string{"system:nodes"})
	if err != nil {
		t.Fatal(err)
	}
	clientFile := filepath.Join(dir, "kubelet-client-current.pem")
	if err := os.WriteFile(clientFile, append(client.CertPEM, client.KeyPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	local := &LocalMirror{URL: "https://198.51.100.1:5001", CAFile: filepath.Join(dir, "ca.crt"), ClientCertFile: clientFile, Peers: true}
	rewriteOnly := *local
	rewriteOnly.Peers = false
	r := &Config{
		Mirrors: map[string]Mirror{
			"registry.test": {Endpoints: []string{"https://mirror.test:5000", "http://plain.test/v2/prefix"}},
			"*":             {Endpoints: []string{"https://everything.test"}},
			"renamed.test":  {Endpoints: []string{"https://mirror.test:5000"}, Rewrites: map[string]string{"^(.*)$": "renamed/$1"}},
		},
		Configs: map[string]HostConfig{"private.test": {TLS: &TLS{InsecureSkipVerify: true}}},
	}
	for _, tc := range []struct {
		name     string
		local    *LocalMirror
		registry string
		want     string
	}{
		{"a registry with mirrors", local, "registry.test",
			"https://198.51.100.1:5001/v2 https://mirror.test:5000/v2 http://plain.test/v2/prefix https://registry.test/v2"},
		{"a registry only configured has the default's mirrors", local, "private.test",
			"https://198.51.100.1:5001/v2 https://everything.test/v2 https://private.test/v2"},
		{"any other registry: the default's mirrors", local, "docker.io", "https://198.51.100.1:5001/v2 https://everything.test/v2 https://registry-1.docker.io/v2"},
		{"without the node's mirror", nil, "registry.test",
			"https://mirror.test:5000/v2 http://plain.test/v2/prefix https://registry.test/v2"},
		{"rewritten: the node's mirror pulls from the mirrors, then the registry by its own names", local, "renamed.test",
			"https://198.51.100.1:5001/v2 https://renamed.test/v2"},
		{"rewritten, without the embedded registry mirror", &rewriteOnly, "renamed.test",
			"https://198.51.100.1:5001/v2 https://renamed.test/v2"},
		{"mirrored, without the embedded registry mirror", &rewriteOnly, "registry.test",
			"https://mirror.test:5000/v2 http://plain.test/v2/prefix https://registry.test/v2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, err := r.HostsFiles(tc.local)
			if err != nil {
				t.Fatal(err)
			}
			root := t.TempDir()
			for d, data := range files {
				if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, d, "hosts.toml"), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			hosts, err := config.ConfigureHosts(context.Background(), config.HostOptions{HostDir: config.HostDirFromRoot(root)})(tc.registry)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range hosts {
				got = append(got, h.Scheme+"://"+h.Host+h.Path)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("hosts of %s = %s\nwant %s", tc.registry, strings.Join(got, " "), tc.want)
			}
			if tc.local != nil && strings.HasPrefix(tc.want, local.URL) {
				// The mirror is verified against the cluster CA and
				// given the node's client certificate.
				tr, ok := hosts[0].Client.Transport.(*http.Transport)
				if !ok || tr.TLSClientConfig == nil || tr.TLSClientConfig.RootCAs == nil || len(tr.TLSClientConfig.Certificates) != 1 {
					t.Errorf("the mirror's TLS: %#v", hosts[0].Client.Transport)
				} else if cert := tr.TLSClientConfig.Certificates[0].Leaf; cert != nil && cert.Subject.CommonName != "system:node:n" {
					t.Errorf("the mirror's client certificate is %s's", cert.Subject.CommonName)
				}
			}
		})
	}
}

// TestRewrites: the first pattern (in their order) that matches renames a
// repository; the others are kept; the credentials are containerd's
// CRI plugin's reading of registries.yaml's auth.
func TestRewrites(t *testing.T) {
	r := &Config{
		Mirrors: map[string]Mirror{"registry.test": {Endpoints: []string{"https://mirror.test/v2/prefix"},
			Rewrites: map[string]string{"^library/(.*)$": "mirrored/$1", "^team/(a|b)$": "teams/$1", "^z": "never"}}},
		Configs: map[string]HostConfig{
			"mirror.test": {Auth: &Auth{Auth: "dXNlcjpwYXNz"}},
			"token.test":  {Auth: &Auth{IdentityToken: "tok", Username: "ignored"}},
			"plain.test":  {Auth: &Auth{Username: "u", Password: "p"}},
			"bad.test":    {Auth: &Auth{Auth: "!!"}},
		},
	}
	rewrites, err := r.Rewrites()
	if err != nil {
		t.Fatal(err)
	}
	rw := rewrites["registry.test"]
	if rw == nil || len(rewrites) != 1 {
		t.Fatalf("rewrites = %v, want registry.test's only", rewrites)
	}
	for in, want := range map[string]string{"library/busybox": "mirrored/busybox", "team/a": "teams/a", "team/c": "team/c", "other/x": "other/x"} {
		if got := rw.Apply(in); got != want {
			t.Errorf("Apply(%q) = %q, want %q", in, got, want)
		}
	}
	hosts, err := rw.Hosts("registry.test")
	if err != nil || len(hosts) != 1 || hosts[0].Host != "mirror.test" || hosts[0].Path != "/v2/prefix" || hosts[0].Scheme != "https" {
		t.Errorf("hosts = %+v, %v; want mirror.test's, its path the API root", hosts, err)
	}
	for host, want := range map[string]string{"mirror.test": "user/pass", "token.test": "/tok", "plain.test": "u/p", "none.test": "/", "bad.test": "error"} {
		u, p, err := r.credentials(host)
		got := u + "/" + p
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("credentials(%s) = %s, want %s", host, got, want)
		}
	}
}
