package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// This file drives the write verbs of kubectl (create, apply, server-side
// apply, patch, replace, delete, dry runs), watches, explain, version and
// describe.

// TestCreate creates one object of each kind with kubectl create and reads
// it back.
func TestCreate(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	for _, tc := range []struct {
		args     []string
		out      string // what kubectl prints
		jsonpath string // read back from the object
		want     string
	}{
		{[]string{"configmap", "cfg", "--from-literal=a=b"}, "configmap/cfg created",
			"configmap cfg -o jsonpath={.data.a}", "b"},
		{[]string{"secret", "generic", "sec", "--from-literal=a=b"}, "secret/sec created",
			"secret sec -o jsonpath={.type}/{.data.a}", "Opaque/Yg=="},
		{[]string{"serviceaccount", "bot"}, "serviceaccount/bot created",
			"serviceaccount bot -o jsonpath={.metadata.name}", "bot"},
		{[]string{"service", "clusterip", "web", "--tcp=80:8080"}, "service/web created",
			"service web -o jsonpath={.spec.type}/{.spec.ports[0].port}/{.spec.ports[0].targetPort}", "ClusterIP/80/8080"},
		{[]string{"service", "nodeport", "np", "--tcp=80:8080"}, "service/np created",
			"service np -o jsonpath={.spec.type}/{.spec.externalTrafficPolicy}", "NodePort/Cluster"},
		{[]string{"service", "clusterip", "hl", "--clusterip=None"}, "service/hl created",
			"service hl -o jsonpath={.spec.type}/{.spec.clusterIP}", "ClusterIP/None"},
	} {
		out := kubectl(t, append([]string{"create", "-n", ns}, tc.args...)...)
		if strings.TrimSpace(out) != tc.out {
			t.Errorf("kubectl create %s: printed %q, want %q", strings.Join(tc.args, " "), out, tc.out)
		}
		get := append([]string{"get", "-n", ns}, strings.Fields(tc.jsonpath)...)
		if got := kubectl(t, get...); got != tc.want {
			t.Errorf("kubectl %s: %q, want %q", strings.Join(get, " "), got, tc.want)
		}
	}
}

// TestApplyClientSide applies a manifest twice, then a changed one.
func TestApplyClientSide(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	manifest := func(v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  key: " + v + "\n"
	}
	for _, step := range []struct{ value, out string }{
		{"one", "configmap/applied created"},
		{"one", "configmap/applied unchanged"},
		{"two", "configmap/applied configured"},
	} {
		out := kubectlStdin(t, manifest(step.value), "apply", "-n", ns, "-f", "-")
		if strings.TrimSpace(out) != step.out {
			t.Errorf("kubectl apply (key: %s): printed %q, want %q", step.value, out, step.out)
		}
	}
	if got := kubectl(t, "get", "configmap", "applied", "-n", ns, "-o", "jsonpath={.data.key}"); got != "two" {
		t.Errorf("after re-apply data.key = %q, want two", got)
	}
	last := kubectl(t, "get", "configmap", "applied", "-n", ns,
		"-o", `jsonpath={.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}`)
	if !strings.Contains(last, `"key":"two"`) {
		t.Errorf("last-applied-configuration %q does not hold the re-applied data", last)
	}
}

// TestServerSideApplyConflict has two field managers set the same field:
// the second apply conflicts until --force-conflicts.
func TestServerSideApplyConflict(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	manifest := func(v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  key: " + v + "\n"
	}
	out := kubectlStdin(t, manifest("one"), "apply", "--server-side", "--field-manager=alice", "-n", ns, "-f", "-")
	if strings.TrimSpace(out) != "configmap/ssa serverside-applied" {
		t.Errorf("first server-side apply printed %q", out)
	}
	stderr := kubectlFails(t, manifest("two"), "apply", "--server-side", "--field-manager=bob", "-n", ns, "-f", "-")
	if want := `Apply failed with 1 conflict: conflict with "alice": .data.key`; !strings.Contains(stderr, want) {
		t.Errorf("conflicting apply: stderr %q lacks %q", stderr, want)
	}
	if got := kubectl(t, "get", "configmap", "ssa", "-n", ns, "-o", "jsonpath={.data.key}"); got != "one" {
		t.Errorf("after the refused apply data.key = %q, want one", got)
	}
	kubectlStdin(t, manifest("two"), "apply", "--server-side", "--field-manager=bob", "--force-conflicts", "-n", ns, "-f", "-")
	got := kubectl(t, "get", "configmap", "ssa", "-n", ns,
		"-o", `jsonpath={.data.key} {range .metadata.managedFields[*]}{.manager}:{.operation} {end}`)
	if strings.TrimSpace(got) != "two bob:Apply" {
		t.Errorf("after --force-conflicts: %q, want data.key two owned by bob alone", got)
	}
}

// TestPatch uses the strategic, merge and json patch types on a service:
// a strategic patch merges ports by port number, a merge patch replaces
// the list.
func TestPatch(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	kubectl(t, "create", "service", "clusterip", "web", "-n", ns, "--tcp=80:8080")
	ports := func() string {
		return kubectl(t, "get", "service", "web", "-n", ns, "-o", `jsonpath={range .spec.ports[*]}{.name}={.port} {end}`)
	}

	kubectl(t, "patch", "service", "web", "-n", ns, "--type=strategic",
		"-p", `{"spec":{"ports":[{"name":"extra","port":81,"targetPort":81}]}}`)
	// Without $setElementOrder the new item comes first, as everywhere.
	if got := strings.TrimSpace(ports()); got != "extra=81 80-8080=80" {
		t.Errorf("after strategic patch ports %q, want extra=81 merged with 80-8080=80", got)
	}
	kubectl(t, "patch", "service", "web", "-n", ns, "--type=merge",
		"-p", `{"spec":{"ports":[{"name":"only","port":82,"targetPort":82}]}}`)
	if got := strings.TrimSpace(ports()); got != "only=82" {
		t.Errorf("after merge patch ports %q, want only=82", got)
	}
	kubectl(t, "patch", "service", "web", "-n", ns, "--type=json",
		"-p", `[{"op":"replace","path":"/metadata/labels/app","value":"patched"},{"op":"add","path":"/metadata/labels/extra","value":"yes"}]`)
	if got := kubectl(t, "get", "service", "web", "-n", ns, "-o", "jsonpath={.metadata.labels.app}/{.metadata.labels.extra}"); got != "patched/yes" {
		t.Errorf("after json patch labels %q, want patched/yes", got)
	}
	// A failing test operation is a 422 with the generic message.
	stderr := kubectlFails(t, "", "patch", "service", "web", "-n", ns, "--type=json",
		"-p", `[{"op":"test","path":"/metadata/labels/app","value":"other"},{"op":"remove","path":"/metadata/labels/extra"}]`)
	if want := "The request is invalid: the server rejected our request due to an error in our request"; stderr != want {
		t.Errorf("json patch with a failing test op: stderr %q, want %q", stderr, want)
	}
	if got := kubectl(t, "get", "service", "web", "-n", ns, "-o", "jsonpath={.metadata.labels.extra}"); got != "yes" {
		t.Errorf("json patch with a failing test op was partly applied: label extra %q", got)
	}
}

// TestPatchRemovesLastFinalizer deletes a configmap held by a finalizer,
// then patches the finalizer away: the registry deletes the object during
// that update (its signal for that must pass kubeboot's patch-error
// mapping unchanged).
func TestPatchRemovesLastFinalizer(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	kubectlStdin(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  finalizers: [example.com/hold]\n", "create", "-n", ns, "-f", "-")
	kubectl(t, "delete", "configmap", "held", "-n", ns, "--wait=false")
	if got := kubectl(t, "get", "configmap", "held", "-n", ns, "-o", "jsonpath={.metadata.finalizers}"); got != `["example.com/hold"]` {
		t.Fatalf("deleted configmap with a finalizer: finalizers %q, want it held", got)
	}
	kubectl(t, "patch", "configmap", "held", "-n", ns, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	if stderr := kubectlFails(t, "", "get", "configmap", "held", "-n", ns); !strings.Contains(stderr, "NotFound") {
		t.Errorf("after the last finalizer was patched away: get %q, want NotFound", stderr)
	}
}

// TestReplace replaces a configmap with a changed copy, then with a stale
// resourceVersion, which conflicts.
func TestReplace(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	kubectl(t, "create", "configmap", "rep", "-n", ns, "--from-literal=key=one")
	stale := kubectl(t, "get", "configmap", "rep", "-n", ns, "-o", "json")
	var obj map[string]any
	if err := json.Unmarshal([]byte(stale), &obj); err != nil {
		t.Fatal(err)
	}
	obj["data"] = map[string]any{"key": "two"}
	changed, _ := json.Marshal(obj)
	if out := kubectlStdin(t, string(changed), "replace", "-f", "-"); strings.TrimSpace(out) != "configmap/rep replaced" {
		t.Errorf("kubectl replace printed %q", out)
	}
	if got := kubectl(t, "get", "configmap", "rep", "-n", ns, "-o", "jsonpath={.data.key}"); got != "two" {
		t.Errorf("after replace data.key = %q, want two", got)
	}
	stderr := kubectlFails(t, stale, "replace", "-f", "-")
	want := `Operation cannot be fulfilled on configmaps "rep": the object has been modified; please apply your changes to the latest version and try again`
	if !strings.Contains(stderr, want) {
		t.Errorf("replace with a stale resourceVersion: stderr %q lacks %q", stderr, want)
	}
}

// TestDelete deletes a configmap and a service; both are gone after.
func TestDelete(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	kubectl(t, "create", "configmap", "gone", "-n", ns)
	kubectl(t, "create", "service", "clusterip", "gone", "-n", ns, "--tcp=80")
	// kubectl 1.37's wording (1.32's ended at "deleted").
	for _, tc := range []struct{ kind, out, notFound string }{
		{"configmap", `configmap "gone" deleted from ` + ns + ` namespace`, `Error from server (NotFound): configmaps "gone" not found`},
		{"service", `service "gone" deleted from ` + ns + ` namespace`, `Error from server (NotFound): services "gone" not found`},
	} {
		if out := kubectl(t, "delete", tc.kind, "gone", "-n", ns); strings.TrimSpace(out) != tc.out {
			t.Errorf("kubectl delete %s gone: printed %q, want %q", tc.kind, out, tc.out)
		}
		if stderr := kubectlFails(t, "", "get", tc.kind, "gone", "-n", ns); stderr != tc.notFound {
			t.Errorf("kubectl get %s gone after delete: %q, want %q", tc.kind, stderr, tc.notFound)
		}
	}
}

// TestWatch runs `kubectl get cm -w --output-watch-events` in the
// background and expects the ADDED, MODIFIED and DELETED events of a
// configmap.
func TestWatch(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	kubectl(t, "create", "configmap", "sentinel", "-n", ns)

	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite.kubectl, "--kubeconfig", suite.kubeconfig, "--cache-dir", suite.cacheDir,
		"get", "cm", "-w", "-n", ns, "--output-watch-events")
	cmd.Env = kubectlEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var seen []string
	expect := func(pattern string) {
		t.Helper()
		re := regexp.MustCompile(pattern)
		timeout := time.After(10 * time.Second)
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("watch ended before %q; saw %q", pattern, seen)
				}
				seen = append(seen, line)
				if re.MatchString(line) {
					return
				}
			case <-timeout:
				t.Fatalf("no watch line %q within 10s; saw %q", pattern, seen)
			}
		}
	}
	expect(`^EVENT\s+NAME\s+DATA\s+AGE$`)
	expect(`^ADDED\s+sentinel\s+0\s+`) // the initial list: the watch is on
	kubectl(t, "create", "configmap", "watched", "-n", ns, "--from-literal=a=1")
	expect(`^ADDED\s+watched\s+1\s+`)
	kubectl(t, "patch", "configmap", "watched", "-n", ns, "-p", `{"data":{"b":"2"}}`)
	expect(`^MODIFIED\s+watched\s+2\s+`)
	kubectl(t, "delete", "configmap", "watched", "-n", ns)
	expect(`^DELETED\s+watched\s+2\s+`)
}

// TestExplain checks that kubectl explain finds the served schemas.
func TestExplain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		field string
		want  []string
	}{
		{"service.spec.ports", []string{"KIND:       Service", "FIELD: ports <[]ServicePort>", "nodePort\t<integer>", "targetPort\t<IntOrString>"}},
		{"lease.spec", []string{"GROUP:      coordination.k8s.io", "KIND:       Lease", "holderIdentity\t<string>", "leaseDurationSeconds\t<integer>"}},
		{"endpointslice.endpoints", []string{"GROUP:      discovery.k8s.io", "addresses\t<[]string> -required-"}},
		{"servicecidr.spec", []string{"GROUP:      networking.k8s.io", "cidrs\t<[]string>"}},
		{"namespace.spec", []string{"finalizers\t<[]string>"}},
	} {
		out := kubectl(t, "explain", tc.field)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("kubectl explain %s: output lacks %q\n%s", tc.field, w, out)
			}
		}
	}
}

// TestVersion checks that kubectl version reports the server version and
// that /version has every field of the reference.
func TestVersion(t *testing.T) {
	t.Parallel()
	out := kubectl(t, "version")
	if !regexp.MustCompile(`(?m)^Server Version: v[0-9]+\.[0-9]+\.[0-9]+\S*$`).MatchString(out) {
		t.Errorf("kubectl version: no Server Version line\n%s", out)
	}
	code, body := apiRequest(t, "GET", "/version", nil)
	if code != 200 {
		t.Fatalf("GET /version: HTTP %d", code)
	}
	var got, ref map[string]string
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("GET /version: %v\n%s", err, body)
	}
	if err := json.Unmarshal([]byte(readTestdata(t, "version.json")), &ref); err != nil {
		t.Fatal(err)
	}
	for key := range ref {
		if _, ok := got[key]; !ok {
			t.Errorf("GET /version: no %q field (the reference has %q)", key, ref[key])
		}
	}
	for _, key := range []string{"major", "minor", "gitVersion", "goVersion", "compiler", "platform"} {
		if got[key] == "" {
			t.Errorf("GET /version: empty %q", key)
		}
	}
}

// TestDescribeService compares `kubectl describe svc` with the reference,
// then creates a core/v1 Event about the service and expects it under
// Events.
func TestDescribeService(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	kubectl(t, "create", "service", "clusterip", "web", "-n", ns, "--tcp=80:8080")
	ip := kubectl(t, "get", "service", "web", "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
	uid := kubectl(t, "get", "service", "web", "-n", ns, "-o", "jsonpath={.metadata.uid}")

	want := strings.NewReplacer("10.96.202.200", ip, "demo", ns).Replace(refOutput(t, "kubectl describe svc web -n demo"))
	got := strings.TrimRight(kubectl(t, "describe", "svc", "web", "-n", ns), "\n")
	if got != want {
		t.Errorf("kubectl describe svc web:\n--- got\n%s\n--- want (reference)\n%s", got, want)
	}

	now := time.Now().UTC().Format(time.RFC3339)
	event := `{"apiVersion":"v1","kind":"Event","metadata":{"name":"web-probe","namespace":"` + ns + `"},` +
		`"involvedObject":{"apiVersion":"v1","kind":"Service","name":"web","namespace":"` + ns + `","uid":"` + uid + `"},` +
		`"reason":"Probe","message":"hello from e2e","type":"Normal","count":1,"source":{"component":"e2e"},` +
		`"firstTimestamp":"` + now + `","lastTimestamp":"` + now + `"}`
	if out := kubectlStdin(t, event, "create", "-f", "-"); strings.TrimSpace(out) != "event/web-probe created" {
		t.Errorf("kubectl create -f event printed %q", out)
	}
	got = kubectl(t, "describe", "svc", "web", "-n", ns)
	re := regexp.MustCompile(`(?m)^Events:\n  Type    Reason  Age +From  Message\n  ----    ------  ---- +----  -------\n  Normal  Probe   (` + age + `) +e2e   hello from e2e$`)
	if !re.MatchString(got) {
		t.Errorf("kubectl describe svc web: the event is not listed under Events\n%s", got)
	}
}

// TestDryRunServer creates objects with --dry-run=server: kubectl reports
// success, nothing is stored and no ClusterIP stays allocated.
func TestDryRunServer(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	if out := kubectl(t, "create", "configmap", "dry", "-n", ns, "--from-literal=a=b", "--dry-run=server"); strings.TrimSpace(out) != "configmap/dry created (server dry run)" {
		t.Errorf("dry-run create configmap printed %q", out)
	}
	if stderr := kubectlFails(t, "", "get", "configmap", "dry", "-n", ns); stderr != `Error from server (NotFound): configmaps "dry" not found` {
		t.Errorf("configmap stored by a dry run: %q", stderr)
	}

	out := kubectl(t, "create", "service", "clusterip", "dry", "-n", ns, "--tcp=80", "--dry-run=server", "-o", "jsonpath={.spec.clusterIP}")
	if stderr := kubectlFails(t, "", "get", "service", "dry", "-n", ns); stderr != `Error from server (NotFound): services "dry" not found` {
		t.Errorf("service stored by a dry run: %q", stderr)
	}
	if out != "" {
		if stderr := kubectlFails(t, "", "get", "ipaddress", out); !strings.Contains(stderr, "not found") {
			t.Errorf("dry-run service left IPAddress %s allocated: %q", out, stderr)
		}
	}
	if got := kubectl(t, "get", "ipaddresses", "-o", "jsonpath={.items[*].spec.parentRef.namespace}"); strings.Contains(got, ns) {
		t.Errorf("an IPAddress points into %s after a dry run only: %q", ns, got)
	}
}
