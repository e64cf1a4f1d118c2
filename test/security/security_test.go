// Package security checks kubeboot's defaults and kube-apiserver's
// security settings end to end, on in-process servers: serving TLS,
// profiling, NodeRestriction, audit, encryption at rest and the data
// dir's file modes (SECURITY.md names the test of each CIS item).
package security

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/app"
	"github.com/kubeboot/kubeboot/internal/platform/clusterjoin"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
	"github.com/kubeboot/kubeboot/internal/platform/secretsencryption"
	"github.com/kubeboot/kubeboot/kubeboottest"
)

func start(t *testing.T, configure func(*controlplane.Config)) *kubeboottest.Server {
	t.Helper()
	return kubeboottest.Start(t, kubeboottest.Options{Configure: configure})
}

func clientFor(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tlsDial connects to the server's port with cfg and returns the
// handshake's error.
func tlsDial(t *testing.T, srv *kubeboottest.Server, cfg *tls.Config) (*tls.ConnectionState, error) {
	t.Helper()
	host := strings.TrimPrefix(srv.URL, "https://")
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", host, cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	state := conn.ConnectionState()
	return &state, nil
}

// TestTLSMinVersion: --tls-min-version=VersionTLS13 refuses a TLS 1.2
// client; the default (VersionTLS12) refuses TLS 1.1.
func TestTLSMinVersion(t *testing.T) {
	tls13 := start(t, func(c *controlplane.Config) { c.SecureServing.MinTLSVersion = "VersionTLS13" })
	if _, err := tlsDial(t, tls13, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12}); err == nil {
		t.Error("a TLS 1.2 client was served under --tls-min-version=VersionTLS13")
	}
	if state, err := tlsDial(t, tls13, &tls.Config{InsecureSkipVerify: true}); err != nil {
		t.Errorf("a TLS 1.3 client: %v", err)
	} else if state.Version != tls.VersionTLS13 {
		t.Errorf("a TLS 1.3 client got version %x", state.Version)
	}
	byDefault := start(t, nil)
	if _, err := tlsDial(t, byDefault, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}); err == nil {
		t.Error("a TLS 1.1 client was served by default")
	}
}

// TestOwnServingCertificate: --tls-cert-file and --tls-private-key-file
// are what the server presents, and no certificate is generated in their
// place.
func TestOwnServingCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.EnsureCA(dir, "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	own, err := pki.NewServing(ca, pki.ServingSpec{CommonName: "my-apiserver", DNSNames: []string{"my-apiserver.example"},
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, own.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, own.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := start(t, func(c *controlplane.Config) {
		c.SecureServing.ServerCert.CertKey.CertFile, c.SecureServing.ServerCert.CertKey.KeyFile = certFile, keyFile
	})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	state, err := tlsDial(t, srv, &tls.Config{RootCAs: roots, ServerName: "my-apiserver.example"})
	if err != nil {
		t.Fatalf("verifying the served certificate against the given CA: %v", err)
	}
	if cn := state.PeerCertificates[0].Subject.CommonName; cn != "my-apiserver" {
		t.Errorf("served certificate %q, want the given one", cn)
	}
	if _, err := os.Stat(filepath.Join(srv.DataDir, "pki", "apiserver.crt")); !os.IsNotExist(err) {
		t.Errorf("a serving certificate was generated although one was given: %v", err)
	}
}

// TestProfilingOffByDefault: /debug/pprof is not served unless
// --profiling is set (CIS 1.2.16).
func TestProfilingOffByDefault(t *testing.T) {
	for _, tc := range []struct {
		name      string
		profiling bool
		want      int
	}{{"default", false, http.StatusNotFound}, {"--profiling", true, http.StatusOK}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := start(t, func(c *controlplane.Config) { c.Features.EnableProfiling = tc.profiling })
			var code int
			clientFor(t, srv.Config).CoreV1().RESTClient().Get().AbsPath("/debug/pprof/").Do(context.Background()).StatusCode(&code)
			if code != tc.want {
				t.Errorf("GET /debug/pprof/: %d, want %d", code, tc.want)
			}
		})
	}
}

// TestNodeRestriction: a node's credentials may label their own Node, but
// may not change another Node, nor set on their own the labels
// NodeRestriction keeps for the cluster's admins; with the plugin
// disabled both are allowed, so the default is what refuses them.
func TestNodeRestriction(t *testing.T) {
	const restricted = "node-restriction.kubernetes.io/pool"
	for _, tc := range []struct {
		name     string
		disable  bool
		wantDeny bool
	}{{"default", false, true}, {"--disable-admission-plugins=NodeRestriction", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := start(t, func(c *controlplane.Config) {
				if tc.disable {
					c.Admission.GenericAdmission.DisablePlugins = []string{"NodeRestriction"}
				}
			})
			ctx := context.Background()
			admin := clientFor(t, srv.Config)
			for _, name := range []string{"n1", "n2"} {
				if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			nodeCfg, err := srv.UserConfig("system:node:n1", "system:nodes")
			if err != nil {
				t.Fatal(err)
			}
			node := clientFor(t, nodeCfg)
			label := func(name, key string) error {
				patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"a"}}}`, key)
				_, err := node.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				return err
			}
			if err := label("n1", "example.com/rack"); err != nil {
				t.Errorf("node n1 labelling itself: %v", err)
			}
			for _, change := range []struct {
				what, node, key string
			}{{"labelling node n2", "n2", "example.com/rack"}, {"setting " + restricted + " on itself", "n1", restricted}} {
				err := label(change.node, change.key)
				if tc.wantDeny && !apierrors.IsForbidden(err) {
					t.Errorf("node n1 %s: %v, want Forbidden", change.what, err)
				}
				if !tc.wantDeny && err != nil {
					t.Errorf("node n1 %s without NodeRestriction: %v", change.what, err)
				}
			}
		})
	}
}

// auditPolicy records every request at Metadata level, as kube-apiserver
// reads it.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// TestAudit: with --audit-policy-file and --audit-log-path, a create,
// update and delete are recorded, each with its user.
func TestAudit(t *testing.T) {
	dir := t.TempDir()
	policyFile, logFile := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policyFile, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := start(t, func(c *controlplane.Config) {
		c.Audit.PolicyFile = policyFile
		c.Audit.LogOptions.Path = logFile
	})
	ctx := context.Background()
	admin := clientFor(t, srv.Config)
	alice := grantAlice(t, srv, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "update"}})
	cms := alice.CoreV1().ConfigMaps("default")
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "audited"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("alice creating a ConfigMap: %v", err)
	}
	cm.Data = map[string]string{"k": "v"}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.CoreV1().ConfigMaps("default").Delete(ctx, "audited", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAudited(t, logFile, "configmaps", "audited", map[string]string{"create": "alice", "update": "alice", "delete": "kubernetes-super-admin"})
}

// TestDefaultAudit: without audit flags, kubeboot's policy is written to
// the data dir (0600) and events go to logs/audit.log there: a change
// and a credential read are recorded with their user, a list of Pods is
// not, and no request or response body is.
func TestDefaultAudit(t *testing.T) {
	srv := start(t, func(c *controlplane.Config) { c.DefaultAudit = true })
	policyFile, logFile := filepath.Join(srv.DataDir, "audit", "policy.yaml"), filepath.Join(srv.DataDir, "logs", "audit.log")
	for _, f := range []string{policyFile, logFile} {
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, info.Mode().Perm())
		}
	}
	ctx := context.Background()
	alice := grantAlice(t, srv, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps", "pods"}, Verbs: []string{"create", "get", "list"}})
	if _, err := alice.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "audited"}, Data: map[string]string{"password": "hunter2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("alice creating a ConfigMap: %v", err)
	}
	if _, err := alice.CoreV1().ConfigMaps("default").Get(ctx, "audited", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAudited(t, logFile, "configmaps", "audited", map[string]string{"create": "alice", "get": "alice"})
	for _, e := range readAudit(t, logFile) {
		if e.User.Username == "alice" && e.ObjectRef != nil && e.ObjectRef.Resource == "pods" {
			t.Errorf("alice's %s of Pods is recorded", e.Verb)
		}
	}
	if data, _ := os.ReadFile(logFile); bytes.Contains(data, []byte("hunter2")) {
		t.Error("the audit log holds a ConfigMap's value: events must stay at Metadata level")
	}
}

// grantAlice gives the user alice rule in namespace default and returns
// her client, once the authorizer sees the binding.
func grantAlice(t *testing.T, srv *kubeboottest.Server, rule rbacv1.PolicyRule) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	admin := clientFor(t, srv.Config)
	if _, err := admin.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		Rules:      []rbacv1.PolicyRule{rule},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "alice"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "alice"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	aliceCfg, err := srv.UserConfig("alice")
	if err != nil {
		t.Fatal(err)
	}
	alice := clientFor(t, aliceCfg)
	// The authorizer sees the new binding through its informer, a moment
	// after it is stored.
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
		Namespace: "default", Group: rule.APIGroups[0], Resource: rule.Resources[0], Verb: rule.Verbs[0]}}}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := alice.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("alice's role is not in force: %v", err)
	}
	return alice
}

// auditEvent is what the tests read of an audit log's JSON event.
type auditEvent struct {
	Stage, Verb string
	User        struct{ Username string }
	ObjectRef   *struct{ Resource, Namespace, Name string }
}

// readAudit reads the JSON audit log at path.
func readAudit(t *testing.T, path string) []auditEvent {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var events []auditEvent
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var e auditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("audit log line %q: %v", line, err)
		}
		events = append(events, e)
	}
	return events
}

// waitAudited waits until the audit log at path has, for the object
// resource default/name, the ResponseComplete event of each verb in want,
// with its user.
func waitAudited(t *testing.T, path, resource, name string, want map[string]string) {
	t.Helper()
	var found map[string]string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		found = map[string]string{}
		for _, e := range readAudit(t, path) {
			if e.Stage == "ResponseComplete" && e.ObjectRef != nil && e.ObjectRef.Resource == resource && e.ObjectRef.Name == name {
				found[e.Verb] = e.User.Username
			}
		}
		return len(found) == len(want), nil
	})
	if err != nil {
		t.Fatalf("audit log has %v for %s default/%s, want %v", found, resource, name, want)
	}
	for verb, user := range want {
		if found[verb] != user {
			t.Errorf("%s recorded for user %q, want %q", verb, found[verb], user)
		}
	}
}

// writeEncryptionConfig writes an encryption configuration for Secrets
// with providers (YAML list items) and returns its path.
func writeEncryptionConfig(t *testing.T, path, providers string) string {
	t.Helper()
	config := "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n" + providers
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// aescbc is an aescbc provider with one 32-byte key named name.
func aescbc(name, key string) string {
	return fmt.Sprintf("  - aescbc:\n      keys:\n      - name: %s\n        secret: %s\n", name, key)
}

const (
	key1 = "c2VjcmV0IGlzIHNlY3VyZSwgc2VjcmV0IGlzIHNlY3I=" // 32 bytes, base64
	key2 = "YW5vdGhlciBrZXkgb2YgdGhpcnR5LXR3byBieXRlcyE="
)

// dataDirHolds reports whether any file under dir holds b.
func dataDirHolds(t *testing.T, dir string, b []byte) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || found {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found = bytes.Contains(data, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestEncryptionAtRest: with aescbc a Secret's value is nowhere in the
// etcd data dir; with identity it is (the test would pass vacuously if
// the scan could not find it).
func TestEncryptionAtRest(t *testing.T) {
	for _, tc := range []struct {
		name      string
		providers string
		wantFound bool
	}{
		{"aescbc", aescbc("key1", key1), false},
		{"identity", "  - identity: {}\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config := writeEncryptionConfig(t, filepath.Join(t.TempDir(), "encryption.yaml"), tc.providers)
			srv := start(t, func(c *controlplane.Config) { c.Etcd.EncryptionProviderConfigFilepath = config })
			plaintext := "plaintext-" + tc.name + "-" + fmt.Sprint(time.Now().UnixNano())
			_, err := clientFor(t, srv.Config).CoreV1().Secrets("default").Create(context.Background(), &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"password": plaintext},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := dataDirHolds(t, filepath.Join(srv.DataDir, "etcd"), []byte(plaintext)); got != tc.wantFound {
				t.Errorf("the Secret's value in the etcd data dir: %t, want %t", got, tc.wantFound)
			}
		})
	}
}

// TestKeyRotation rotates the Secrets' key on a running server
// (--encryption-provider-config-automatic-reload), as kube-apiserver's
// documented procedure does: add the new key first, rewrite every Secret,
// drop the old key. No Secret is lost. A restart with only a key the
// Secrets were not written with is refused, naming a Secret, rather than
// serving them as errors.
func TestKeyRotation(t *testing.T) {
	dataDir := t.TempDir()
	config := writeEncryptionConfig(t, filepath.Join(t.TempDir(), "encryption.yaml"), aescbc("key1", key1))
	withReload := func(c *controlplane.Config) {
		c.Etcd.EncryptionProviderConfigFilepath = config
		c.Etcd.EncryptionProviderConfigAutomaticReload = true
	}
	srv, err := kubeboottest.StartServer(kubeboottest.Options{DataDir: dataDir, Configure: withReload})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	secrets := clientFor(t, srv.Config).CoreV1().Secrets("default")
	const n = 20
	for i := range n {
		if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i)},
			StringData: map[string]string{"v": fmt.Sprint(i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// New key first: writes use it, reads still know key1.
	reloads := successfulReloads(t, srv)
	writeEncryptionConfig(t, config, aescbc("key2", key2)+aescbc("key1", key1))
	waitReloaded(t, srv, reloads)
	list, err := secrets.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if _, err := secrets.Update(ctx, &s, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("rewriting %s: %v", s.Name, err)
		}
	}
	reloads = successfulReloads(t, srv)
	writeEncryptionConfig(t, config, aescbc("key2", key2))
	waitReloaded(t, srv, reloads)
	for i := range n {
		s, err := secrets.Get(ctx, fmt.Sprintf("s%d", i), metav1.GetOptions{})
		if err != nil || string(s.Data["v"]) != fmt.Sprint(i) {
			t.Fatalf("Secret s%d after rotation: %v, %q", i, err, s.Data["v"])
		}
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}

	// Only key3, which no Secret was written with: refused at start.
	writeEncryptionConfig(t, config, aescbc("key3", key1))
	_, err = kubeboottest.StartServer(kubeboottest.Options{DataDir: dataDir, Configure: withReload})
	if err == nil || !strings.Contains(err.Error(), "--encryption-provider-config") || !strings.Contains(err.Error(), "/secrets/default/s") {
		t.Fatalf("start with a key no Secret was written with: %v, want a refusal naming the flag and a Secret", err)
	}
}

// waitReloaded waits until the server has loaded its encryption
// configuration once more than it had when reloads were counted
// (kube-apiserver's automatic_reloads_total metric).
func waitReloaded(t *testing.T, srv *kubeboottest.Server, reloads float64) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return successfulReloads(t, srv) > reloads, nil
	})
	if err != nil {
		t.Fatalf("the encryption configuration was not reloaded: %v", err)
	}
}

// successfulReloads is the server's count of successful automatic reloads
// of its encryption configuration.
func successfulReloads(t *testing.T, srv *kubeboottest.Server) float64 {
	t.Helper()
	data, err := clientFor(t, srv.Config).CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "apiserver_encryption_config_controller_automatic_reloads_total{") && strings.Contains(line, `status="success"`) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err == nil {
				total += v
			}
		}
	}
	return total
}

// TestFileModes: the data dir is 0700 at every start, whatever mode it
// had, so are pki and the etcd data, every file in pki is 0600,
// certificates too, and so is admin.kubeconfig (CIS 1.1.11, 1.1.13,
// 1.1.20, 1.1.21).
func TestFileModes(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(dataDir, "pki"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func() {
		srv, err := kubeboottest.StartServer(kubeboottest.Options{DataDir: dataDir})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	start()
	// As an earlier version left them, or a user changed them.
	if err := os.Chmod(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dataDir, "pki", "ca.crt"), 0o644); err != nil {
		t.Fatal(err)
	}
	start()
	for _, want := range []struct {
		path string
		mode fs.FileMode
	}{{dataDir, 0o700}, {filepath.Join(dataDir, "pki"), 0o700}, {filepath.Join(dataDir, "etcd"), 0o700}, {filepath.Join(dataDir, "admin.kubeconfig"), 0o600}, {filepath.Join(dataDir, "super-admin.kubeconfig"), 0o600}} {
		if fi, err := os.Stat(want.path); err != nil || fi.Mode().Perm() != want.mode {
			t.Errorf("%s: mode %v (%v), want %v", want.path, fi.Mode().Perm(), err, want.mode)
		}
	}
	entries, err := os.ReadDir(filepath.Join(dataDir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatal("no files in pki")
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		want := fs.FileMode(0o600)
		if info.IsDir() { // the CSR signer's certificate, etcd's CA
			want = 0o700
		}
		if info.Mode().Perm() != want {
			t.Errorf("pki/%s mode %v, want %v", e.Name(), info.Mode().Perm(), want)
		}
	}
}

// TestAdminKubeconfigs: as kubeadm's, admin.kubeconfig is a user in group
// kubeadm:cluster-admins, cluster-admin through a binding an admin can
// revoke; super-admin.kubeconfig is system:masters, which keeps working.
func TestAdminKubeconfigs(t *testing.T) {
	srv := start(t, nil)
	ctx := context.Background()
	load := func(name string) kubernetes.Interface {
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(srv.DataDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return clientFor(t, cfg)
	}
	admin, superAdmin := load("admin.kubeconfig"), load("super-admin.kubeconfig")
	review, err := admin.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := review.Status.UserInfo; u.Username != "kubernetes-admin" || !slices.Contains(u.Groups, "kubeadm:cluster-admins") || slices.Contains(u.Groups, "system:masters") {
		t.Errorf("admin.kubeconfig is %q in %v, want kubernetes-admin in kubeadm:cluster-admins, not system:masters", u.Username, u.Groups)
	}
	listSecrets := func(c kubernetes.Interface) error {
		_, err := c.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
		return err
	}
	if err := listSecrets(admin); err != nil {
		t.Errorf("admin listing kube-system's Secrets: %v", err)
	}
	if err := superAdmin.RbacV1().ClusterRoleBindings().Delete(ctx, "kubeadm:cluster-admins", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return apierrors.IsForbidden(listSecrets(admin)), nil
	})
	if err != nil {
		t.Errorf("admin still allowed once kubeadm:cluster-admins is deleted: %v", err)
	}
	if err := listSecrets(superAdmin); err != nil {
		t.Errorf("super admin listing kube-system's Secrets: %v", err)
	}
}

// TestCAExpirationWarning: a server whose CA, or a client CA given by
// --client-ca-file, is within 120 days of its expiry (which it never
// renews) says so at each certificate check, with a Warning Event of
// reason CertificateExpirationWarning on its identity Lease (it has no
// Node), as k3s does on its Node.
func TestCAExpirationWarning(t *testing.T) {
	dataDir := t.TempDir()
	pkiDir := filepath.Join(dataDir, "pki")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	notAfter := time.Now().Add(100 * 24 * time.Hour)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "old-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{"ca.crt": {Type: "CERTIFICATE", Bytes: der}, "ca.key": {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(filepath.Join(pkiDir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A client CA of the user's, as near its expiry: the server uses it
	// and never renews it.
	userCA := filepath.Join(t.TempDir(), "user-ca.crt")
	if err := os.WriteFile(userCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := kubeboottest.StartServer(kubeboottest.Options{DataDir: dataDir,
		Configure: func(c *controlplane.Config) {
			c.CertificateCheckInterval = 100 * time.Millisecond
			c.Authentication.ClientCert.ClientCA = userCA
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	admin := clientFor(t, srv.Config)
	for _, want := range []string{"pki/ca.crt", userCA + " (--client-ca-file)"} {
		var last string
		err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			events, err := admin.CoreV1().Events(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, e := range events.Items {
				if e.Reason == controlplane.CertificateExpirationWarning && strings.Contains(e.Message, want) {
					last = fmt.Sprintf("%s %s/%s: %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
					return e.Type == corev1.EventTypeWarning && e.InvolvedObject.Kind == "Lease" &&
						strings.Contains(e.Message, notAfter.UTC().Format(time.DateOnly)), nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Errorf("no Warning CertificateExpirationWarning naming %s and its expiry on the server's Lease: %v (last: %q)", want, err, last)
		}
	}
}

// TestCertificateRenewal: a running server issues a new serving
// certificate, and serves it without a restart, when its own is within 120
// days of its expiry and when `kubeboot certificate rotate` retired it;
// `certificate check` lists them.
func TestCertificateRenewal(t *testing.T) {
	dataDir := t.TempDir()
	srv, err := kubeboottest.StartServer(kubeboottest.Options{DataDir: dataDir,
		Configure: func(c *controlplane.Config) { c.CertificateCheckInterval = 100 * time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	pkiDir := filepath.Join(dataDir, "pki")
	ca, err := pki.EnsureCA(pkiDir, "unused: the data dir has its CA")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	served := func() *x509.Certificate {
		state, err := tlsDial(t, srv, &tls.Config{RootCAs: roots, ServerName: "localhost"})
		if err != nil {
			t.Fatalf("the served certificate does not verify against the cluster CA: %v", err)
		}
		return state.PeerCertificates[0]
	}
	waitServed := func(what string, ok func(*x509.Certificate) bool) {
		t.Helper()
		var last *x509.Certificate
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			last = served()
			return ok(last), nil
		})
		if err != nil {
			t.Fatalf("%s: still serving serial %s, expiring %s", what, last.SerialNumber, last.NotAfter)
		}
	}

	// A certificate 30 days from its expiry, as a clock set forward by
	// eleven months would see the one issued at start.
	first := served()
	soon := *first
	soon.SerialNumber = big.NewInt(42)
	soon.NotBefore, soon.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(30*24*time.Hour)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &soon, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// The key first: the server's reload takes both once the certificate
	// matches.
	if err := os.WriteFile(filepath.Join(pkiDir, "apiserver.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkiDir, "apiserver.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	waitServed("renewal within 120 days of expiry", func(c *x509.Certificate) bool {
		return c.SerialNumber.Cmp(first.SerialNumber) != 0 && c.SerialNumber.Int64() != 42 && time.Until(c.NotAfter) > 300*24*time.Hour
	})

	renewed := served()
	if _, err := pki.Retire(pkiDir, []string{"apiserver"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitServed("renewal after rotate", func(c *x509.Certificate) bool { return c.SerialNumber.Cmp(renewed.SerialNumber) != 0 })

	certs, err := pki.Inspect(pkiDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range certs {
		if status := c.Status(time.Now()); status != "ok" {
			t.Errorf("certificate %s: %s", c.Name, status)
		}
	}
}

// TestSecretsEncryption: --secrets-encryption generates a key (0600) and
// encrypts Secrets with it; k3s's cycle runs on the running server, each
// stage loaded without a restart: prepare, rotate and reencrypt put every
// Secret on a new key; disable and reencrypt store them unencrypted,
// enable and reencrypt encrypted again; a stage out of order is refused;
// restarted with --secrets-encryption-provider=secretbox, rotate-keys
// moves every Secret to a secretbox key. Every Secret reads back at every
// step.
func TestSecretsEncryption(t *testing.T) {
	dataDir := t.TempDir()
	start := func(provider string) *kubeboottest.Server {
		t.Helper()
		srv, err := kubeboottest.StartServer(kubeboottest.Options{DataDir: dataDir,
			Configure: func(c *controlplane.Config) { c.SecretsEncryption, c.SecretsEncryptionProvider = true, provider }})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	srv := start(secretsencryption.AESCBC)
	defer func() { srv.Stop() }()
	config := secretsencryption.ConfigPath(dataDir)
	if fi, err := os.Stat(config); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("encryption configuration %s: %v, %v; want 0600", config, fi, err)
	}
	ctx := context.Background()
	const n = 50
	for i := range n {
		if _, err := clientFor(t, srv.Config).CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i)},
			StringData: map[string]string{"v": fmt.Sprintf("plaintext-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if dataDirHolds(t, filepath.Join(dataDir, "etcd"), []byte("plaintext-7")) {
		t.Error("a Secret's value is in the etcd data dir in plain text")
	}
	readable := func(step string) {
		t.Helper()
		for i := range n {
			s, err := clientFor(t, srv.Config).CoreV1().Secrets("default").Get(ctx, fmt.Sprintf("s%d", i), metav1.GetOptions{})
			if err != nil || string(s.Data["v"]) != fmt.Sprintf("plaintext-%d", i) {
				t.Fatalf("after %s: Secret s%d: %v, %q", step, i, err, s.Data["v"])
			}
		}
	}
	run := func(args ...string) (string, error) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := app.Run(ctx, append([]string{"kubeboot", "secrets-encrypt"}, append(args, "--data-dir", dataDir)...), &stdout, &stderr); code != 0 {
			return stdout.String(), fmt.Errorf("exit %d: %s", code, stderr.String())
		}
		return stdout.String(), nil
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("secrets-encrypt %v: %v", args, err)
		}
		readable(strings.Join(args, " "))
		return out
	}
	// The server makes the record once ready.
	var status string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		status, _ = run("status")
		return strings.Contains(status, "All hashes match"), nil
	}); err != nil {
		t.Fatalf("status never shows the server on the record:\n%s", status)
	}
	writer := func(status string) string {
		t.Helper()
		_, rest, _ := strings.Cut(status, " *  ")
		line, _, _ := strings.Cut(rest, "\n")
		fields := strings.Fields(line)
		if len(fields) != 2 {
			t.Fatalf("no active key in\n%s", status)
		}
		return fields[1]
	}
	first := writer(status)
	for _, want := range []string{"Encryption Status: Enabled", "Current Rotation Stage: start", "AES-CBC", fmt.Sprintf("Secrets stored with %s: %d", first, n)} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}

	if _, err := run("rotate"); err == nil || !strings.Contains(err.Error(), "rotate follows prepare") {
		t.Errorf("rotate at the stage start: %v", err)
	}
	must("prepare")
	must("rotate")
	if out := must("reencrypt"); !strings.Contains(out, fmt.Sprintf("re-encrypted %d Secrets", n)) {
		t.Errorf("reencrypt reported %q", out)
	}
	status = must("status")
	second := writer(status)
	if second == first || !strings.Contains(status, "Current Rotation Stage: reencrypt_finished") || !strings.Contains(status, fmt.Sprintf("Secrets stored with %s: %d\n", second, n)) ||
		strings.Count(status, "Secrets stored with") != 1 || strings.Contains(status, first) {
		t.Errorf("after prepare, rotate, reencrypt: want every Secret on a new key, the old one gone:\n%s", status)
	}

	must("disable")
	must("reencrypt")
	if status = must("status"); !strings.Contains(status, "Encryption Status: Disabled") || !strings.Contains(status, fmt.Sprintf("Secrets stored with identity: %d", n)) {
		t.Errorf("after disable, reencrypt: want every Secret unencrypted:\n%s", status)
	}
	must("enable")
	must("reencrypt")
	if status = must("status"); !strings.Contains(status, "Encryption Status: Enabled") || writer(status) == "identity" ||
		!strings.Contains(status, fmt.Sprintf("Secrets stored with %s: %d", writer(status), n)) {
		t.Errorf("after enable, reencrypt: want every Secret encrypted:\n%s", status)
	}

	// Another provider, from the next rotation on.
	srv.Stop()
	srv = start(secretsencryption.Secretbox)
	if out := must("rotate-keys"); !strings.Contains(out, fmt.Sprintf("re-encrypted %d of %d Secrets", n, n)) {
		t.Errorf("rotate-keys reported %q", out)
	}
	status = must("status")
	if key := writer(status); !strings.HasPrefix(key, "secretbox-") || !strings.Contains(status, "XSalsa20-POLY1305") ||
		!strings.Contains(status, fmt.Sprintf("Secrets stored with %s: %d\n", key, n)) || strings.Count(status, "Secrets stored with") != 1 {
		t.Errorf("rotate-keys with --secrets-encryption-provider=secretbox: want every Secret on a secretbox key:\n%s", status)
	}
}

// TestRotateCA: `certificate generate-ca` and `rotate-ca` replace the
// cluster's CAs and service account key; a bad set is refused and changes
// nothing; the server takes the rotation at its next start and issues its
// certificates from the new CA, while what trusts or was issued by the old
// one keeps working: the admin kubeconfig written before (the old CA, a
// client certificate of the old CA), a service account token issued
// before; the join token carries the new CA's hash.
func TestRotateCA(t *testing.T) {
	dataDir := t.TempDir()
	srv, err := kubeboottest.StartServer(kubeboottest.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin := clientFor(t, srv.Config)
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "before", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldAdmin, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	pkiDir := filepath.Join(dataDir, "pki")
	oldCA, err := pki.EnsureCA(pkiDir, "unused: the data dir has its CA")
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, int) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := app.Run(ctx, append([]string{"kubeboot", "certificate"}, append(args, "--data-dir", dataDir)...), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}

	refuseUnrelatedCA(t, run, pkiDir)

	staged := t.TempDir()
	if _, stderr, code := run("generate-ca", "--path", staged); code != 0 {
		t.Fatalf("generate-ca: exit %d: %s", code, stderr)
	}
	stdout, stderr, code := run("rotate-ca", "--path", staged)
	if code != 0 {
		t.Fatalf("rotate-ca: exit %d: %s", code, stderr)
	}
	newCA, err := pki.Load(filepath.Join(staged, "tls", "server-ca.crt"), filepath.Join(staged, "tls", "server-ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "the join token, once every server has restarted: K10") {
		t.Errorf("rotate-ca printed %q, want the new join token", stdout)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}

	srv, err = kubeboottest.StartServer(kubeboottest.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	current, err := pki.EnsureCA(pkiDir, "unused: the data dir has its CA")
	if err != nil {
		t.Fatal(err)
	}
	if !current.Cert.Equal(newCA.Cert) {
		t.Fatalf("the cluster CA after the restart is %s, want the rotated %s", current.Cert.Subject, newCA.Cert.Subject)
	}
	for name, root := range map[string]*x509.Certificate{"the old CA alone": oldCA.Cert, "the new CA alone": newCA.Cert} {
		roots := x509.NewCertPool()
		roots.AddCert(root)
		state, err := tlsDial(t, srv, &tls.Config{RootCAs: roots, ServerName: "localhost"})
		if err != nil {
			t.Errorf("the served certificate against %s: %v", name, err)
			continue
		}
		if err := state.PeerCertificates[0].CheckSignatureFrom(newCA.Cert); err != nil {
			t.Errorf("the served certificate is not issued by the new CA: %v", err)
		}
	}
	oldAdmin.Host = srv.URL
	if _, err := clientFor(t, oldAdmin).CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the admin kubeconfig written before the rotation: %v", err)
	}
	newAdmin, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clientFor(t, newAdmin).CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the admin kubeconfig written after the rotation: %v", err)
	}
	review, err := clientFor(t, srv.Config).AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
	if err != nil || !review.Status.Authenticated {
		t.Errorf("a service account token issued before the rotation: %v, %+v", err, review.Status)
	}
	token, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	caFile, err := os.ReadFile(filepath.Join(pkiDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "K10" + clusterjoin.CAHash(caFile) + "::"; !strings.HasPrefix(string(token), want) {
		t.Errorf("the join token %q, want it to carry the new CA file's hash (%s)", token, want)
	}
}

// refuseUnrelatedCA: rotate-ca of a CA the current one did not sign is
// refused without --force, naming the file, and stages nothing.
func refuseUnrelatedCA(t *testing.T, run func(args ...string) (string, string, int), pkiDir string) {
	t.Helper()
	bad := t.TempDir()
	unrelated, err := pki.NewCA("unrelated")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(bad, "tls"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"server-ca.crt": unrelated.CertPEM, "server-ca.key": unrelated.KeyPEM} {
		if err := os.WriteFile(filepath.Join(bad, "tls", name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, stderr, code := run("rotate-ca", "--path", bad); code == 0 || !strings.Contains(stderr, "server-ca.crt is not signed by the ca in use") {
		t.Errorf("rotate-ca of an unrelated CA: exit %d, %q; want a refusal naming server-ca.crt", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(pkiDir, "rotate-ca-pending")); !os.IsNotExist(err) {
		t.Fatalf("a refused rotation staged something: %v", err)
	}
}

// TestEffectiveFlags: a server publishes what kube-apiserver and its
// in-process components run with as their own flags, for auditors
// (SECURITY.md, hack/kube-bench): a command line per component in the
// data dir's flags/, readable by root only, and kube-apiserver's flags
// at /flagz (upstream's endpoint), both with the values resolved at
// start and what a flag changed.
func TestEffectiveFlags(t *testing.T) {
	srv := kubeboottest.Start(t, kubeboottest.Options{Controllers: []string{"*"}, Configure: func(c *controlplane.Config) {
		c.Audit.LogOptions.MaxAge = 7
	}})
	line := func(component string) string {
		t.Helper()
		path := filepath.Join(srv.DataDir, "flags", component)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", path, fi.Mode().Perm())
		}
		if !strings.HasPrefix(string(data), component+" --") {
			t.Errorf("%s: %q, want %s's command line", path, data, component)
		}
		return string(data)
	}
	for component, want := range map[string][]string{
		"kube-apiserver": {"--authorization-mode=Node,RBAC", "--profiling=false", "--anonymous-auth=false", "--audit-log-maxage=7",
			"--enable-admission-plugins=NamespaceLifecycle,", ",NodeRestriction,", "--client-ca-file=" + filepath.Join(srv.DataDir, "pki", "ca.crt"),
			"--kubelet-client-certificate=" + filepath.Join(srv.DataDir, "pki")},
		"kube-controller-manager": {"--use-service-account-credentials=true", "--profiling=false", "--bind-address=127.0.0.1",
			"--root-ca-file=" + filepath.Join(srv.DataDir, "pki", "ca.crt")},
		"etcd": {"--data-dir=" + filepath.Join(srv.DataDir, "etcd"), "--listen-client-urls=unix://"},
	} {
		got := line(component)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s's flags have no %s: %s", component, w, got)
			}
		}
		// Off by default: not on the line, as not on a command line.
		for _, off := range []string{"--token-auth-file", "--encryption-provider-config", "--contention-profiling"} {
			if strings.Contains(got, off) {
				t.Errorf("%s's flags name %s: %s", component, off, got)
			}
		}
	}

	body, err := clientFor(t, srv.Config).CoreV1().RESTClient().Get().AbsPath("/flagz").SetHeader("Accept", "text/plain").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("GET /flagz: %v", err)
	}
	for _, w := range []string{"authorization-mode", "Node,RBAC", "audit-log-maxage"} {
		if !strings.Contains(string(body), w) {
			t.Errorf("/flagz has no %s:\n%s", w, body)
		}
	}
}
