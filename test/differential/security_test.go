package differential

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubeboot/kubeboot/test/harness"
)

// encryptionConfig encrypts Secrets with aescbc, as both servers are
// given it.
const encryptionConfig = `apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [secrets]
  providers:
  - aescbc:
      keys:
      - name: key1
        secret: c2VjcmV0IGlzIHNlY3VyZSwgc2VjcmV0IGlzIHNlY3I=
  - identity: {}
`

// TestEncryptedDataInterchangeable: with the same
// --encryption-provider-config, a Secret either server stores is
// encrypted in etcd as kube-apiserver encrypts it (aescbc, key1) and the
// other server reads it back byte for byte.
func TestEncryptedDataInterchangeable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts kube-apiserver")
	}
	dir := t.TempDir()
	bin, peerBin := binaries(t, dir)
	config := filepath.Join(dir, "encryption.yaml")
	if err := os.WriteFile(config, []byte(encryptionConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	encrypt := "--encryption-provider-config=" + config
	etcdURL := harness.StartEtcd(t, filepath.Join(dir, "etcd"))
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdURL}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	const ns = "/api/v1/namespaces/default/secrets"
	secret := func(name string) string {
		return fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":%q},"stringData":{"password":"s3cret-%s"}}`, name, name)
	}
	// write stores Secret name through s, checks it is encrypted in etcd,
	// and returns what a GET answered.
	write := func(s server, name string) answer {
		if a := s.do(t, request{method: "POST", path: ns, body: secret(name)}); a.code != http.StatusCreated {
			t.Fatalf("%s: create Secret %s: %d\n%s", s.name, name, a.code, a.body)
		}
		resp, err := etcd.Get(context.Background(), "/registry/secrets/default/"+name)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("%s: Secret %s in etcd: %v, %d keys", s.name, name, err, len(resp.Kvs))
		}
		if v := resp.Kvs[0].Value; !bytes.HasPrefix(v, []byte("k8s:enc:aescbc:v1:key1:")) || bytes.Contains(v, []byte("s3cret")) {
			t.Errorf("%s stored Secret %s as %q..., want aescbc with key1", s.name, name, v[:min(len(v), 40)])
		}
		return s.do(t, request{method: "GET", path: ns + "/" + name})
	}
	read := func(s server, name string, want answer) {
		if got := s.do(t, request{method: "GET", path: ns + "/" + name}); got.code != want.code || got.raw != want.raw {
			t.Errorf("%s reads Secret %s differently:\nwritten: %d\n%s\nread: %d\n%s", s.name, name, want.code, want.raw, got.code, got.raw)
		}
	}

	kb := harness.StartReadyAPIServer(t, time.Minute, bin, filepath.Join(dir, "kubeboot"), "--secure-port=0", serviceRange, "--etcd-servers="+etcdURL, encrypt)
	kbConfig, err := kb.Config()
	if err != nil {
		t.Fatal(err)
	}
	fromKubeboot := write(newServer(t, "kubeboot", kbConfig), "from-kubeboot")
	if err := kb.Terminate(30 * time.Second); err != nil {
		t.Fatal(err)
	}

	p := harness.StartPeer(t, peerBin, filepath.Join(dir, "peer"), etcdURL, serviceRange, encrypt)
	peerServer := newServer(t, "kube-apiserver", p.Config)
	read(peerServer, "from-kubeboot", fromKubeboot)
	fromPeer := write(peerServer, "from-peer")
	p.Stop()

	kb = harness.StartReadyAPIServer(t, time.Minute, bin, filepath.Join(dir, "kubeboot"), "--secure-port=0", serviceRange, "--etcd-servers="+etcdURL, encrypt)
	if kbConfig, err = kb.Config(); err != nil {
		t.Fatal(err)
	}
	read(newServer(t, "kubeboot", kbConfig), "from-peer", fromPeer)
}

// auditPolicy records ConfigMap requests at RequestResponse level and
// nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: RequestResponse
  resources:
  - group: ""
    resources: [configmaps]
- level: None
`

// TestAuditEventsMatch: with the same --audit-policy-file, a ConfigMap's
// create is recorded in the same audit events by both servers: the same
// stages, fields and values but for what names the request (its ID, times,
// user, source).
func TestAuditEventsMatch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts kube-apiserver")
	}
	dir := t.TempDir()
	bin, peerBin := binaries(t, dir)
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	audit := func(name string) (path string, args []string) {
		path = filepath.Join(dir, name+"-audit.log")
		return path, []string{"--audit-policy-file=" + policy, "--audit-log-path=" + path}
	}
	kbLog, kbArgs := audit("kubeboot")
	peerLog, peerArgs := audit("peer")
	kb := harness.StartReadyAPIServer(t, time.Minute, bin, filepath.Join(dir, "kubeboot"), append([]string{"--secure-port=0", serviceRange}, kbArgs...)...)
	kbConfig, err := kb.Config()
	if err != nil {
		t.Fatal(err)
	}
	p := harness.StartPeer(t, peerBin, filepath.Join(dir, "peer"), harness.StartEtcd(t, filepath.Join(dir, "etcd")), append([]string{serviceRange}, peerArgs...)...)
	create := request{method: "POST", path: "/api/v1/namespaces/default/configmaps?fieldManager=diff",
		body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"audited"},"data":{"k":"v"}}`}
	events := map[string][]map[string]any{}
	for _, s := range []struct {
		server
		log string
	}{{newServer(t, "kube-apiserver", p.Config), peerLog}, {newServer(t, "kubeboot", kbConfig), kbLog}} {
		if a := s.do(t, create); a.code != http.StatusCreated {
			t.Fatalf("%s: %d\n%s", s.name, a.code, a.body)
		}
		events[s.name] = auditEvents(t, s.log, "audited")
	}
	want, got := events["kube-apiserver"], events["kubeboot"]
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("audit events of the create: kube-apiserver %d, kubeboot %d", len(want), len(got))
	}
	for i := range want {
		w, g := normalizeEvent(want[i]), normalizeEvent(got[i])
		if w != g {
			t.Errorf("audit event %d differs:\nkube-apiserver: %s\nkubeboot:       %s", i, w, g)
		}
	}
}

// auditEvents returns the events of the JSON audit log at path about the
// ConfigMap name, in order, once the log has its ResponseComplete.
func auditEvents(t *testing.T, path, name string) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var events []map[string]any
		complete := false
		data, _ := os.ReadFile(path)
		for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
			var e map[string]any
			if json.Unmarshal(line, &e) != nil {
				continue
			}
			if ref, ok := e["objectRef"].(map[string]any); ok && ref["name"] == name {
				events = append(events, e)
				complete = complete || e["stage"] == "ResponseComplete"
			}
		}
		if complete || time.Now().After(deadline) {
			return events
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// normalizeEvent is an event without what names the request (ID, times,
// user and source) or the stored object (UID, resourceVersion, time),
// as sorted JSON.
func normalizeEvent(e map[string]any) string {
	for _, k := range []string{"auditID", "requestReceivedTimestamp", "stageTimestamp", "user", "sourceIPs", "userAgent"} {
		delete(e, k)
	}
	for _, k := range []string{"responseObject", "requestObject"} {
		if obj, ok := e[k].(map[string]any); ok {
			if meta, ok := obj["metadata"].(map[string]any); ok {
				for _, f := range volatileFields {
					delete(meta, f)
				}
			}
		}
	}
	if ref, ok := e["objectRef"].(map[string]any); ok {
		delete(ref, "resourceVersion")
		delete(ref, "uid")
	}
	if annotations, ok := e["annotations"].(map[string]any); ok {
		// Which authorizer allowed it, and why: both servers' admins are
		// system:masters, but authenticated differently. Not the latency
		// annotations: upstream's audit filter adds them to any request
		// slower than 500 ms, which says how loaded the machine was.
		keys := make([]string, 0, len(annotations))
		for k := range annotations {
			if !strings.HasPrefix(k, "apiserver.latency.k8s.io/") {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		e["annotations"] = strings.Join(keys, ",")
	}
	out, _ := json.Marshal(e)
	return string(out)
}
