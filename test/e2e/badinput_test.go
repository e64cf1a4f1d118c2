package e2e

import (
	"bytes"
	"strings"
	"testing"
)

// This file sends bad input, with kubectl and as raw HTTPS requests, and
// compares the answers with the reference Status bodies. TestBadInput runs
// the cases in parallel and then requires /readyz to still answer 200.

// TestBadInput groups the bad-input cases and checks readiness after them.
func TestBadInput(t *testing.T) {
	t.Parallel()
	t.Run("cases", func(t *testing.T) {
		t.Run("invalid services", testInvalidServices)
		t.Run("malformed JSON", testMalformedJSON)
		t.Run("wrong kind", testWrongKind)
		t.Run("oversized body", testOversizedBody)
		t.Run("already exists", testAlreadyExists)
		t.Run("missing namespace", testMissingNamespace)
		t.Run("get missing", testGetMissing)
		t.Run("immortal namespaces", testImmortalNamespaces)
		t.Run("terminating namespace", testTerminatingNamespace)
		t.Run("anonymous", testAnonymous)
	})
	if err := waitReady(2 * pollInterval); err != nil {
		t.Errorf("after bad input: %v", err)
	}
}

// testInvalidServices creates invalid services with kubectl create -f and
// as raw POSTs: each gets the reference 422 Status, which kubectl prints.
func testInvalidServices(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	for _, tc := range []struct{ title, name, spec string }{
		{"invalid name", "Bad_Name", `{"ports":[{"port":80}]}`},
		{"port out of range", "d5", `{"ports":[{"port":70000}]}`},
		{"no ports", "d6", `{"selector":{"app":"d6"}}`},
		{"duplicate port name", "d7", `{"ports":[{"name":"a","port":80},{"name":"a","port":81}]}`},
		{"unnamed ports when several", "d8", `{"ports":[{"port":80},{"port":81}]}`},
		{"bad protocol", "d9", `{"ports":[{"port":80,"protocol":"ICMP"}]}`},
		{"bad type", "d10", `{"type":"Bogus","ports":[{"port":80}]}`},
	} {
		t.Run(tc.title, func(t *testing.T) {
			t.Parallel()
			want := refStatus(t, tc.title)
			manifest := serviceJSON(tc.name, tc.spec)
			if got := kubectlFails(t, manifest, "create", "-n", ns, "-f", "-"); got != kubectlInvalid(want) {
				t.Errorf("kubectl create -f (%s):\n  got  %q\n  want %q", manifest, got, kubectlInvalid(want))
			}
			code, body := apiRequest(t, "POST", "/api/v1/namespaces/"+ns+"/services", []byte(manifest))
			requireStatus(t, "POST "+manifest, code, body, want)
		})
	}
}

// testMalformedJSON posts truncated JSON: 400 with a json parse error.
func testMalformedJSON(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	path := "/api/v1/namespaces/" + ns + "/services"
	body := `{"apiVersion":"v1","kind":`
	want := refStatus(t, "malformed JSON")
	code, got := apiRequest(t, "POST", path, []byte(body))
	requireStatus(t, "POST "+body, code, got, want)
	if !strings.Contains(string(got), "json parse error") {
		t.Errorf("POST %s: body lacks \"json parse error\": %s", body, got)
	}
	stderr := kubectlFails(t, body, "create", "--raw", path, "-f", "-")
	if w := "Error from server (BadRequest): " + want.Message; stderr != w {
		t.Errorf("kubectl create --raw %s:\n  got  %q\n  want %q", path, stderr, w)
	}
}

// testWrongKind posts a ConfigMap to the services collection: 400.
func testWrongKind(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web"},"data":{"a":"b"}}`
	code, got := apiRequest(t, "POST", "/api/v1/namespaces/"+ns+"/services", []byte(body))
	want := refStatus(t, "wrong kind in body")
	requireStatus(t, "POST a ConfigMap to services", code, got, want)
}

// testOversizedBody posts bodies over the 3 MiB request limit: 413.
func testOversizedBody(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	if ref := refStatusText(t, "oversized body (4 MiB)"); ref != "HTTP 413" {
		t.Fatalf("reference oversized body answer %q", ref)
	}
	for _, size := range []int{3<<20 + 1, 4 << 20} {
		prefix := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"a":"`
		suffix := `"}}`
		body := []byte(prefix + strings.Repeat("x", size-len(prefix)-len(suffix)) + suffix)
		code, got := apiRequest(t, "POST", "/api/v1/namespaces/"+ns+"/configmaps", body)
		if code != 413 {
			t.Errorf("POST a %d-byte ConfigMap: HTTP %d, want 413\n%.300s", len(body), code, got)
		}
	}
	if stderr := kubectlFails(t, "", "get", "configmap", "big", "-n", ns); !strings.Contains(stderr, "not found") {
		t.Errorf("oversized ConfigMap stored: %q", stderr)
	}
}

// testAlreadyExists creates a service twice: 409 AlreadyExists.
func testAlreadyExists(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	kubectl(t, "create", "service", "clusterip", "web", "-n", ns, "--tcp=80:8080")
	want := refStatus(t, "already exists")
	stderr := kubectlFails(t, "", "create", "service", "clusterip", "web", "-n", ns, "--tcp=80:8080")
	if w := "error: failed to create ClusterIP service: " + want.Message; stderr != w {
		t.Errorf("kubectl create service web again:\n  got  %q\n  want %q", stderr, w)
	}
	code, body := apiRequest(t, "POST", "/api/v1/namespaces/"+ns+"/services", []byte(serviceJSON("web", `{"ports":[{"port":80}]}`)))
	requireStatus(t, "POST service web again", code, body, want)
}

// testMissingNamespace creates in a namespace that does not exist: 404.
func testMissingNamespace(t *testing.T) {
	t.Parallel()
	want := refStatus(t, "missing namespace")
	stderr := kubectlFails(t, "", "create", "service", "clusterip", "web", "-n", "nope", "--tcp=80:8080")
	if w := "error: failed to create ClusterIP service: " + want.Message; stderr != w {
		t.Errorf("kubectl create service -n nope:\n  got  %q\n  want %q", stderr, w)
	}
	code, body := apiRequest(t, "POST", "/api/v1/namespaces/nope/services", []byte(serviceJSON("web", `{"ports":[{"port":80}]}`)))
	requireStatus(t, "POST a service to namespace nope", code, body, want)
}

// testGetMissing gets a service that does not exist: 404.
func testGetMissing(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	want := refStatus(t, "get missing")
	if stderr := kubectlFails(t, "", "get", "service", "nope", "-n", ns); stderr != "Error from server (NotFound): "+want.Message {
		t.Errorf("kubectl get service nope: %q", stderr)
	}
	code, body := apiRequest(t, "GET", "/api/v1/namespaces/"+ns+"/services/nope", nil)
	requireStatus(t, "GET service nope", code, body, want)
}

// testImmortalNamespaces deletes kube-system (403), and default and
// kube-public with a server dry run (403 too, and nothing at stake).
func testImmortalNamespaces(t *testing.T) {
	t.Parallel()
	want := refStatus(t, "delete immortal namespace")
	stderr := kubectlFails(t, "", "delete", "namespace", "kube-system", "--wait=false")
	if w := "Error from server (Forbidden): " + want.Message; stderr != w {
		t.Errorf("kubectl delete namespace kube-system:\n  got  %q\n  want %q", stderr, w)
	}
	code, body := apiRequest(t, "DELETE", "/api/v1/namespaces/kube-system", nil)
	requireStatus(t, "DELETE namespace kube-system", code, body, want)
	for _, name := range []string{"default", "kube-public"} {
		want := refStatus(t, "delete immortal namespace", "kube-system", name)
		code, body := apiRequest(t, "DELETE", "/api/v1/namespaces/"+name+"?dryRun=All", nil)
		requireStatus(t, "DELETE namespace "+name+" (dry run)", code, body, want)
	}
	for _, name := range []string{"default", "kube-system", "kube-public"} {
		if phase := kubectl(t, "get", "namespace", name, "-o", "jsonpath={.status.phase}"); phase != "Active" {
			t.Errorf("namespace %s is %q after the refused deletes", name, phase)
		}
	}
}

// testTerminatingNamespace deletes a namespace that a finalizer on a
// configmap keeps terminating, then creates in it: 403.
func testTerminatingNamespace(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	blockNamespace(t, ns)
	kubectl(t, "delete", "namespace", ns, "--wait=false")
	stderr := kubectlFails(t, "", "create", "configmap", "late", "-n", ns)
	w := `error: failed to create configmap: configmaps "late" is forbidden: unable to create new content in namespace ` + ns + ` because it is being terminated`
	if stderr != w {
		t.Errorf("kubectl create configmap in a terminating namespace:\n  got  %q\n  want %q", stderr, w)
	}
	code, body := apiRequest(t, "POST", "/api/v1/namespaces/"+ns+"/configmaps", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"late"}}`))
	if code != 403 {
		t.Fatalf("POST a configmap to terminating %s: HTTP %d, want 403\n%s", ns, code, body)
	}
	st := decodeStatus(t, body)
	if st.Reason != "Forbidden" || st.Details == nil || len(st.Details.Causes) != 1 ||
		st.Details.Causes[0].Type != "NamespaceTerminating" || st.Details.Causes[0].Field != "metadata.namespace" ||
		st.Details.Causes[0].Message != "namespace "+ns+" is being terminated" {
		t.Errorf("POST a configmap to terminating %s: want reason Forbidden with a NamespaceTerminating cause on metadata.namespace\n%s", ns, body)
	}
}

// testAnonymous sends requests without credentials, verifying the server
// against the kubeconfig CA: the health and version endpoints answer, the
// API does not.
func testAnonymous(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]int{
		"/healthz": 200, "/livez": 200, "/readyz": 200, "/version": 200,
		"/api/v1/namespaces": 401,
	} {
		code, body := doRequest(t, suite.anon, "GET", path, nil)
		if code != want {
			t.Errorf("anonymous GET %s: HTTP %d, want %d\n%.300s", path, code, want, body)
		}
		if path == "/healthz" && !bytes.Equal(body, []byte("ok")) {
			t.Errorf("anonymous GET /healthz: body %q, want ok", body)
		}
	}
}
