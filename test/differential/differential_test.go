// Package differential sends the same requests to kubeboot and to the real
// kube-apiserver 1.37.2, built from this module's graph, and compares the
// answers: status codes, Status reasons, messages and causes, defaulted
// objects and tables.
package differential

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeboot/kubeboot/test/harness"
)

// server is one side of the comparison.
type server struct {
	name   string
	host   string
	client *http.Client
}

var kubeboot, peer server

func TestMain(m *testing.M) { harness.Main(m) }

// Both servers get the same Service range.
const serviceRange = "--service-cluster-ip-range=10.96.0.0/16"

// binaries returns kubeboot's binary and kube-apiserver's, built into dir.
func binaries(t *testing.T, dir string) (kubeboot, peer string) {
	t.Helper()
	kubeboot, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	peer, err = harness.BuildPeer(dir)
	if err != nil {
		t.Fatal(err)
	}
	return kubeboot, peer
}

// startServers starts both servers.
func startServers(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	bin, peerBin := binaries(t, dir)
	kb := harness.StartReadyAPIServer(t, time.Minute, bin, filepath.Join(dir, "kubeboot"), "--secure-port=0", serviceRange)
	p := harness.StartPeer(t, peerBin, filepath.Join(dir, "peer"), harness.StartEtcd(t, filepath.Join(dir, "etcd")), serviceRange)
	kbConfig, err := kb.Config()
	if err != nil {
		t.Fatal(err)
	}
	kubeboot = newServer(t, "kubeboot", kbConfig)
	peer = newServer(t, "kube-apiserver", p.Config)
}

func newServer(t *testing.T, name string, cfg *rest.Config) server {
	t.Helper()
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return server{name: name, host: cfg.Host, client: c}
}

// request is one API call.
type request struct {
	method, path string
	body         string
	contentType  string // default application/json
	accept       string // default application/json
	impersonate  string
}

// answer is a response: body is normalized for comparing two servers,
// raw is the body as served (for comparing one etcd's data read twice).
type answer struct {
	code int
	body string
	raw  string
}

func (s server) do(t *testing.T, r request) answer {
	t.Helper()
	req, err := http.NewRequest(r.method, s.host+r.path, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	req.Header.Set("Accept", "application/json")
	if r.accept != "" {
		req.Header.Set("Accept", r.accept)
	}
	if r.impersonate != "" {
		req.Header.Set("Impersonate-User", r.impersonate)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s to %s: %v", r.method, r.path, s.name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{code: resp.StatusCode, body: normalize(t, b), raw: string(b)}
}

// What legitimately differs between two servers: identities, times,
// versions and random name suffixes.
var (
	volatileFields = []string{"uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "managedFields"}
	randomSuffix   = regexp.MustCompile(`kube-api-access-[a-z0-9]{5}`)
	ageCell        = regexp.MustCompile(`^[0-9]+(ms|s|m|h|d)$|^<unknown>$`)
)

// normalize drops what legitimately differs and re-encodes the JSON with
// sorted keys and indentation, so that a diff is readable.
func normalize(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return string(b) // not JSON: compared as is
	}
	uids := map[string]bool{}
	collectUIDs(v, uids)
	v = scrub(v, uids)
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return randomSuffix.ReplaceAllString(string(out), "kube-api-access-XXXXX")
}

func collectUIDs(v any, uids map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "uid" {
				uids[s] = true
			}
			collectUIDs(x, uids)
		}
	case []any:
		for _, x := range v {
			collectUIDs(x, uids)
		}
	}
}

func scrub(v any, uids map[string]bool) any {
	switch v := v.(type) {
	case map[string]any:
		if meta, ok := v["metadata"].(map[string]any); ok {
			for _, f := range volatileFields {
				delete(meta, f)
			}
		}
		// Discovery's server addresses are each server's own.
		delete(v, "serverAddressByClientCIDRs")
		// Table rows: the Age cell is time.
		if cells, ok := v["cells"].([]any); ok {
			for i, c := range cells {
				if s, ok := c.(string); ok && ageCell.MatchString(s) {
					cells[i] = "AGE"
				}
			}
		}
		for k, x := range v {
			v[k] = scrub(x, uids)
		}
		return v
	case []any:
		for i, x := range v {
			v[i] = scrub(x, uids)
		}
		return v
	case string:
		for uid := range uids {
			v = strings.ReplaceAll(v, uid, "UID")
		}
		return v
	}
	return v
}

// TestSameAnswers runs a sequence of requests (later ones build on the
// objects earlier ones made) against both servers and compares each answer.
func TestSameAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts kube-apiserver")
	}
	startServers(t)
	const ns = "/api/v1/namespaces/diff"
	pod := func(name, spec string) string {
		return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q},"spec":%s}`, name, spec)
	}
	deployment := func(name, selector, labels string) string {
		return fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%q},
			"spec":{"selector":{"matchLabels":{"app":%q}},"template":{"metadata":{"labels":{"app":%q}},
			"spec":{"containers":[{"name":"web","image":"nginx"}]}}}}`, name, selector, labels)
	}
	steps := []struct {
		name string
		req  request
	}{
		{"create namespace", request{method: "POST", path: "/api/v1/namespaces", body: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"diff"}}`}},
		{"namespace with an invalid name", request{method: "POST", path: "/api/v1/namespaces", body: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"Not_Valid"}}`}},
		{"pod before its service account exists", request{method: "POST", path: ns + "/pods", body: pod("early", `{"containers":[{"name":"c","image":"nginx"}]}`)}},
		{"create default service account", request{method: "POST", path: ns + "/serviceaccounts", body: `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default"}}`}},
		{"create pod: defaults, token volume, tolerations", request{method: "POST", path: ns + "/pods", body: pod("web", `{"containers":[{"name":"c","image":"nginx","ports":[{"containerPort":80}]}]}`)}},
		{"pod without containers", request{method: "POST", path: ns + "/pods", body: pod("empty", `{"containers":[]}`)}},
		{"pod with invalid fields", request{method: "POST", path: ns + "/pods", body: pod("bad", `{"containers":[{"name":"C_1","image":"","ports":[{"containerPort":70000}]}],"restartPolicy":"Sometimes"}`)}},
		{"pod that already exists", request{method: "POST", path: ns + "/pods", body: pod("web", `{"containers":[{"name":"c","image":"nginx"}]}`)}},
		{"get missing pod", request{method: "GET", path: ns + "/pods/nope"}},
		{"list pods as a table", request{method: "GET", path: ns + "/pods", accept: "application/json;as=Table;v=v1;g=meta.k8s.io"}},
		{"pod field selector", request{method: "GET", path: ns + "/pods?fieldSelector=spec.nodeName%3D"}},
		{"unknown field selector", request{method: "GET", path: ns + "/pods?fieldSelector=spec.bogus%3Dx"}},
		{"create deployment: defaults", request{method: "POST", path: "/apis/apps/v1/namespaces/diff/deployments", body: deployment("web", "web", "web")}},
		{"deployment whose selector does not match its template", request{method: "POST", path: "/apis/apps/v1/namespaces/diff/deployments", body: deployment("bad", "web", "other")}},
		{"scale subresource", request{method: "GET", path: "/apis/apps/v1/namespaces/diff/deployments/web/scale"}},
		{"merge patch with invalid JSON", request{method: "PATCH", path: "/apis/apps/v1/namespaces/diff/deployments/web", body: `{"spec":`, contentType: "application/merge-patch+json"}},
		{"strategic merge patch of replicas", request{method: "PATCH", path: "/apis/apps/v1/namespaces/diff/deployments/web", body: `{"spec":{"replicas":3}}`, contentType: "application/strategic-merge-patch+json"}},
		{"create job: defaults", request{method: "POST", path: "/apis/batch/v1/namespaces/diff/jobs", body: `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"once"},"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}}`}},
		{"cronjob with an invalid schedule", request{method: "POST", path: "/apis/batch/v1/namespaces/diff/cronjobs", body: `{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"c"},"spec":{"schedule":"every day","jobTemplate":{"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}}}}`}},
		{"role with a rule without verbs", request{method: "POST", path: "/apis/rbac.authorization.k8s.io/v1/namespaces/diff/roles", body: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r"},"rules":[{"apiGroups":[""],"resources":["pods"]}]}`}},
		{"create role", request{method: "POST", path: "/apis/rbac.authorization.k8s.io/v1/namespaces/diff/roles", body: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"pod-reader"},"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get","list"]}]}`}},
		{"list pods as a user without rights", request{method: "GET", path: ns + "/pods", impersonate: "alice"}},
		{"bind the role to alice", request{method: "POST", path: "/apis/rbac.authorization.k8s.io/v1/namespaces/diff/rolebindings", body: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"alice"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"pod-reader"},"subjects":[{"kind":"User","name":"alice","apiGroup":"rbac.authorization.k8s.io"}]}`}},
		{"alice may not delete pods", request{method: "DELETE", path: ns + "/pods/web", impersonate: "alice"}},
		{"alice may not escalate by binding cluster-admin", request{method: "POST", path: "/apis/rbac.authorization.k8s.io/v1/namespaces/diff/rolebindings", impersonate: "alice", body: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"esc"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"},"subjects":[{"kind":"User","name":"alice","apiGroup":"rbac.authorization.k8s.io"}]}`}},
		{"priority class above the user limit", request{method: "POST", path: "/apis/scheduling.k8s.io/v1/priorityclasses", body: `{"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","metadata":{"name":"too-high"},"value":2000000001}`}},
		{"NodePort out of range", request{method: "POST", path: ns + "/services", body: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"np"},"spec":{"type":"NodePort","ports":[{"port":80,"nodePort":80}]}}`}},
		{"token request for a missing account", request{method: "POST", path: ns + "/serviceaccounts/nobody/token", body: `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}`}},
		{"configmap with an invalid key", request{method: "POST", path: ns + "/configmaps", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a b":"x"}}`}},
		{"ingress without a backend", request{method: "POST", path: "/apis/networking.k8s.io/v1/namespaces/diff/ingresses", body: `{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"i"},"spec":{}}`}},
		{"delete deployment", request{method: "DELETE", path: "/apis/apps/v1/namespaces/diff/deployments/web"}},
		{"delete namespace", request{method: "DELETE", path: "/api/v1/namespaces/diff"}},
		{"create in a terminating namespace", request{method: "POST", path: ns + "/configmaps", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"late"}}`}},
		// One OpenAPI v3 document from each server of the chain: the
		// definitions, their names and GVK extensions are upstream's.
		// The groups, from the aggregator's APIServices (the list an
		// old client reads, and the conformance suite).
		{"discovery: the groups", request{method: "GET", path: "/apis"}},
		{"discovery: the core versions", request{method: "GET", path: "/api"}},
		{"OpenAPI v3 of a built-in group", request{method: "GET", path: "/openapi/v3/apis/scheduling.k8s.io/v1"}},
		{"OpenAPI v3 of apiextensions", request{method: "GET", path: "/openapi/v3/apis/apiextensions.k8s.io/v1"}},
		{"OpenAPI v3 of apiregistration", request{method: "GET", path: "/openapi/v3/apis/apiregistration.k8s.io/v1"}},
		// The whole v2 document, which the aggregator merges from the
		// three servers: paths, operation IDs and definitions.
		{"OpenAPI v2", request{method: "GET", path: "/openapi/v2"}},
	}
	for _, step := range steps {
		want := peer.do(t, step.req)
		got := kubeboot.do(t, step.req)
		if got.code != want.code || got.body != want.body {
			t.Errorf("%s (%s %s):\nkube-apiserver: %d, kubeboot: %d\n%s", step.name, step.req.method, step.req.path,
				want.code, got.code, firstDifference(want.body, got.body))
		}
	}
}

// firstDifference shows where two answers part: both whole if they are
// short, else the lines around the first that differs (an OpenAPI v2
// document has ~100,000).
func firstDifference(want, got string) string {
	const short, around = 60, 8
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	if len(w) <= short && len(g) <= short {
		return "kube-apiserver:\n" + want + "\nkubeboot:\n" + got
	}
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	lines := func(s []string) string {
		return strings.Join(s[max(0, i-around):min(len(s), i+around)], "\n")
	}
	return fmt.Sprintf("first difference at line %d of %d (kube-apiserver) and %d (kubeboot)\nkube-apiserver:\n%s\nkubeboot:\n%s",
		i+1, len(w), len(g), lines(w), lines(g))
}

// TestEtcdDataInterchangeable: objects kubeboot stores are read back the
// same by kube-apiserver on the same etcd, and the other way round:
// storage versions, key layout and encoding are upstream's.
func TestEtcdDataInterchangeable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts kube-apiserver")
	}
	dir := t.TempDir()
	bin, peerBin := binaries(t, dir)
	etcdURL := harness.StartEtcd(t, filepath.Join(dir, "etcd"))
	startKubeboot := func() (*harness.APIServer, server) {
		kb := harness.StartReadyAPIServer(t, time.Minute, bin, filepath.Join(dir, "kubeboot"), "--secure-port=0", serviceRange, "--etcd-servers="+etcdURL)
		cfg, err := kb.Config()
		if err != nil {
			t.Fatal(err)
		}
		return kb, newServer(t, "kubeboot", cfg)
	}

	objects := []struct{ collection, body string }{
		{"/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shared"}}`},
		{"/api/v1/namespaces/shared/configmaps", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"NAME","labels":{"a":"b"}},"data":{"k":"v"},"binaryData":{"b":"AAEC"}}`},
		{"/api/v1/namespaces/shared/secrets", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"NAME"},"type":"Opaque","stringData":{"password":"s3cret"}}`},
		{"/api/v1/namespaces/shared/services", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"NAME"},"spec":{"type":"NodePort","ports":[{"port":80}]}}`},
		{"/apis/apps/v1/namespaces/shared/deployments", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"NAME"},"spec":{"selector":{"matchLabels":{"app":"a"}},"template":{"metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}}}`},
		{"/apis/rbac.authorization.k8s.io/v1/namespaces/shared/roles", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"NAME"},"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]}`},
		{"/apis/batch/v1/namespaces/shared/cronjobs", `{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"NAME"},"spec":{"schedule":"*/5 * * * *","jobTemplate":{"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}}}}`},
	}
	// write creates the objects named name through s and returns what a
	// GET of each answered.
	write := func(s server, name string) map[string]answer {
		stored := map[string]answer{}
		for _, o := range objects {
			body := strings.ReplaceAll(o.body, "NAME", name)
			if o.collection == "/api/v1/namespaces" {
				if name != "from-kubeboot" {
					continue // created once
				}
			}
			if a := s.do(t, request{method: "POST", path: o.collection, body: body}); a.code != http.StatusCreated {
				t.Fatalf("%s: create in %s: %d\n%s", s.name, o.collection, a.code, a.body)
			}
			path := o.collection + "/" + name
			if o.collection == "/api/v1/namespaces" {
				path = o.collection + "/shared"
			}
			stored[path] = s.do(t, request{method: "GET", path: path})
		}
		return stored
	}
	read := func(s server, stored map[string]answer) {
		for path, want := range stored {
			// The same etcd data: identical, UIDs, versions and times too.
			if got := s.do(t, request{method: "GET", path: path}); got.code != want.code || got.raw != want.raw {
				t.Errorf("%s reads %s differently:\nwritten: %d\n%s\nread: %d\n%s", s.name, path, want.code, want.raw, got.code, got.raw)
			}
		}
	}

	kb, kbServer := startKubeboot()
	fromKubeboot := write(kbServer, "from-kubeboot")
	if err := kb.Terminate(30 * time.Second); err != nil {
		t.Fatal(err)
	}

	p := harness.StartPeer(t, peerBin, filepath.Join(dir, "peer"), etcdURL, serviceRange)
	peerServer := newServer(t, "kube-apiserver", p.Config)
	read(peerServer, fromKubeboot)
	fromPeer := write(peerServer, "from-peer")
	p.Stop()

	_, kbServer = startKubeboot()
	read(kbServer, fromPeer)
	read(kbServer, fromKubeboot)
}
