package e2e

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// This file drives a CustomResourceDefinition through its lifecycle with
// kubectl: apply, discovery and APIServices, printer columns, explain,
// defaults, schema and CEL validation, two versions without conversion,
// the status and scale subresources, and deletion with the cleanup of its
// objects. The CRD (testdata/crds/widget-crd.yaml) is cluster-scoped state
// in a group no other test uses.

const (
	crdGroup    = "e2e.kubeboot.test"
	crdPlural   = "widgets"
	crdName     = crdPlural + "." + crdGroup
	crdFile     = "testdata/crds/widget-crd.yaml"
	crdObjects  = "testdata/crds/widget-objects.yaml"
	crdV1beta1  = crdPlural + ".v1beta1." + crdGroup // kubectl's resource.version.group
	crdWarning  = "Warning: e2e.kubeboot.test/v1beta1 Widget is deprecated; use e2e.kubeboot.test/v1"
	crdTypeName = "widget.e2e.kubeboot.test" // how kubectl names an object: widget.e2e.kubeboot.test/NAME
	// crdUsableWithin is how soon after `kubectl apply` of the CRD returns
	// `kubectl get <plural>` must work.
	crdUsableWithin = time.Second
	// crdPollTimeout bounds the waits for asynchronous effects (APIService
	// registration and removal, re-creation).
	crdPollTimeout = 10 * time.Second
)

// TestCRDLifecycle runs the steps in order on one CRD: each step depends on
// the CRD the first one applies and the objects the third one creates, so
// a failure of those stops the test. The CRD is deleted at the end (by the
// last step, or by the cleanup after a failure).
func TestCRDLifecycle(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	t.Cleanup(func() {
		if r := runKubectl(t, "", "delete", "crd", crdName, "--ignore-not-found"); r.err != nil {
			t.Errorf("cleanup: %s: %v\n%s", r.cmdline, r.err, r.stderr)
		}
	})
	for _, step := range []struct {
		name     string
		run      func(t *testing.T, ns string)
		required bool // the later steps cannot run without it
	}{
		{"apply then get within 1s", testCRDApplyThenGet, true},
		{"established", testCRDEstablished, false},
		{"create objects", testCRDCreateObjects, true},
		{"apiservices and api-resources", testCRDDiscovery, false},
		{"printer columns", testCRDPrinterColumns, false},
		{"explain", testCRDExplain, false},
		{"defaults and pruning", testCRDDefaults, false},
		{"invalid objects refused", testCRDInvalid, false},
		{"versions without conversion", testCRDVersions, false},
		{"status subresource", testCRDStatus, false},
		{"scale subresource", testCRDScale, false},
		{"stop serving a version", testCRDStopServing, false},
		{"delete removes objects", testCRDDelete, false},
	} {
		if !t.Run(step.name, func(t *testing.T) { step.run(t, ns) }) && step.required {
			t.Fatalf("step %q failed; the later steps need it", step.name)
		}
	}
}

// widgetManifest is a Widget named name in apiVersion e2e.kubeboot.test/
// version with spec, given as a JSON object (which is also YAML).
func widgetManifest(version, name, spec string) string {
	return "apiVersion: " + crdGroup + "/" + version + "\nkind: Widget\nmetadata:\n  name: " + name + "\nspec: " + spec + "\n"
}

// widgetPath is the REST path of the widgets of ns in version, or of one
// widget (and subresource) when rest is given.
func widgetPath(version, ns string, rest ...string) string {
	return strings.Join(append([]string{"/apis", crdGroup, version, "namespaces", ns, crdPlural}, rest...), "/")
}

// getJSON runs kubectl with args (which must ask for -o json or --raw) and
// decodes stdout into v; it returns stderr.
func getJSON(t *testing.T, v any, args ...string) string {
	t.Helper()
	r := runKubectl(t, "", args...)
	if r.err != nil {
		t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", r.cmdline, r.err, r.stdout, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("%s: output is not JSON: %v\n%s", r.cmdline, err, r.stdout)
	}
	return r.stderr
}

// requireNoWidget fails unless `kubectl get widget name` is NotFound.
func requireNoWidget(t *testing.T, ns, name string) {
	t.Helper()
	want := `Error from server (NotFound): ` + crdName + ` "` + name + `" not found`
	if stderr := kubectlFails(t, "", "get", "widget", name, "-n", ns); stderr != want {
		t.Errorf("kubectl get widget %s: stderr %q, want %q", name, stderr, want)
	}
}

// widgetField reads one jsonpath of widget name.
func widgetField(t *testing.T, ns, name, jsonpath string) string {
	t.Helper()
	return kubectl(t, "get", "widget", name, "-n", ns, "-o", "jsonpath="+jsonpath)
}

// pollKubectl runs kubectl with args until it succeeds or timeout passes
// and returns the successful result, how long after start it came and how
// many runs it took.
func pollKubectl(t *testing.T, start time.Time, timeout time.Duration, args ...string) (result, time.Duration, int) {
	t.Helper()
	for attempts := 1; ; attempts++ {
		r := runKubectl(t, "", args...)
		if r.err == nil {
			return r, time.Since(start), attempts
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: still failing %s after start (%d runs): %v\nstderr: %s", r.cmdline, timeout, attempts, r.err, r.stderr)
		}
		// Each kubectl run takes tens of milliseconds already: poll
		// tightly to measure the latency closely.
		time.Sleep(10 * time.Millisecond)
	}
}

// testCRDApplyThenGet applies the CRD and measures how long after the apply
// returns `kubectl get widgets` first succeeds: within crdUsableWithin.
func testCRDApplyThenGet(t *testing.T, ns string) {
	out := kubectl(t, "apply", "-f", crdFile)
	applied := time.Now()
	if want := "customresourcedefinition.apiextensions.k8s.io/" + crdName + " created"; strings.TrimSpace(out) != want {
		t.Errorf("kubectl apply -f %s: printed %q, want %q", crdFile, out, want)
	}
	r, elapsed, attempts := pollKubectl(t, applied, crdPollTimeout, "get", crdPlural, "-n", ns)
	t.Logf("kubectl get %s first succeeded %s after kubectl apply returned (%d kubectl runs)",
		crdPlural, elapsed.Round(time.Millisecond), attempts)
	// A first run that succeeds found the resource served at once; its
	// time is kubectl's own (over a second when the suite loads both
	// cores). Only a retry says the server was late.
	if attempts > 1 && elapsed >= crdUsableWithin {
		t.Errorf("kubectl get %s first succeeded %s after the apply returned, want < %s", crdPlural, elapsed, crdUsableWithin)
	}
	if want := "No resources found in " + ns + " namespace.\n"; r.stdout != "" || r.stderr != want {
		t.Errorf("%s: stdout %q stderr %q, want no stdout and stderr %q", r.cmdline, r.stdout, r.stderr, want)
	}
}

// testCRDEstablished waits for the Established condition with kubectl wait
// and checks the CRD's conditions, accepted names and stored versions.
func testCRDEstablished(t *testing.T, ns string) {
	out := kubectl(t, "wait", "--for", "condition=established", "--timeout=10s", "crd/"+crdName)
	if want := "customresourcedefinition.apiextensions.k8s.io/" + crdName + " condition met"; strings.TrimSpace(out) != want {
		t.Errorf("kubectl wait --for condition=established: printed %q, want %q", out, want)
	}
	got := kubectl(t, "get", "crd", crdName, "-o",
		`jsonpath={range .status.conditions[*]}{.type}={.status} {end}|{.status.acceptedNames.kind}/{.status.acceptedNames.plural}/{.status.acceptedNames.shortNames}|{.status.storedVersions}`)
	if want := `NamesAccepted=True Established=True |Widget/widgets/["wdg"]|["v1"]`; got != want {
		t.Errorf("CRD status (conditions|accepted names|stored versions):\n  got  %q\n  want %q", got, want)
	}
}

// testCRDCreateObjects applies testdata/crds/widget-objects.yaml: full
// and plain, through v1. The first create takes about 2 s: like
// kube-apiserver, apiextensions-apiserver holds creates that come within
// 2 s of the CRD becoming Established (customresource_handler.go).
func testCRDCreateObjects(t *testing.T, ns string) {
	out := kubectl(t, "apply", "-n", ns, "-f", crdObjects)
	if want := crdTypeName + "/full created\n" + crdTypeName + "/plain created\n"; out != want {
		t.Fatalf("kubectl apply -f %s: printed %q, want %q", crdObjects, out, want)
	}
}

// testCRDDiscovery waits for the APIServices of both versions to be
// registered and Available (registration is asynchronous) and lists the
// resource with api-resources.
func testCRDDiscovery(t *testing.T, ns string) {
	eventually(t, crdPollTimeout, "APIServices v1 and v1beta1 of "+crdGroup+" Available", func() (bool, string) {
		r := runKubectl(t, "", "get", "apiservices")
		if r.err != nil {
			return false, r.cmdline + ": " + r.err.Error() + ": " + r.stderr
		}
		tb := parseTable(t, r.stdout)
		if want := []string{"NAME", "SERVICE", "AVAILABLE", "AGE"}; !reflect.DeepEqual(tb.header, want) {
			return false, "header " + strings.Join(tb.header, ",")
		}
		for _, name := range []string{"v1." + crdGroup, "v1beta1." + crdGroup} {
			if n := len(tb.find(t, map[string]string{"NAME": lit(name), "SERVICE": "Local", "AVAILABLE": "True", "AGE": age})); n != 1 {
				return false, "no row " + name + " Local True in\n" + r.stdout
			}
		}
		return true, ""
	})

	tb := parseTable(t, kubectl(t, "api-resources", "--api-group="+crdGroup))
	if want := []string{"NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"}; !reflect.DeepEqual(tb.header, want) {
		t.Fatalf("kubectl api-resources --api-group=%s: header %q, want %q", crdGroup, tb.header, want)
	}
	if want := [][]string{{"widgets", "wdg", crdGroup + "/v1", "true", "Widget"}}; !reflect.DeepEqual(tb.rows, want) {
		t.Errorf("kubectl api-resources --api-group=%s: rows %q, want %q", crdGroup, tb.rows, want)
	}

	versions := kubectl(t, "api-versions")
	for _, gv := range []string{crdGroup + "/v1", crdGroup + "/v1beta1"} {
		if !strings.Contains("\n"+versions, "\n"+gv+"\n") {
			t.Errorf("kubectl api-versions lacks %s:\n%s", gv, versions)
		}
	}
}

// testCRDPrinterColumns lists the widgets through each version: the
// columns are the version's additionalPrinterColumns (Max only with -o
// wide), the cells the objects' values.
func testCRDPrinterColumns(t *testing.T, ns string) {
	for _, tc := range []struct {
		args    []string
		header  []string
		rows    []map[string]string // column to anchored regexp
		warning bool                // v1beta1 is deprecated
	}{
		{[]string{"get", crdPlural}, []string{"NAME", "REPLICAS", "COLOR", "PHASE", "AGE"}, []map[string]string{
			{"NAME": "full", "REPLICAS": "3", "COLOR": "green", "PHASE": "", "AGE": age},
			{"NAME": "plain", "REPLICAS": "1", "COLOR": "blue", "PHASE": "", "AGE": age},
		}, false},
		{[]string{"get", "wdg", "-o", "wide"}, []string{"NAME", "REPLICAS", "COLOR", "PHASE", "MAX", "AGE"}, []map[string]string{
			{"NAME": "full", "REPLICAS": "3", "COLOR": "green", "PHASE": "", "MAX": "4", "AGE": age},
			{"NAME": "plain", "REPLICAS": "1", "COLOR": "blue", "PHASE": "", "MAX": "10", "AGE": age},
		}, false},
		{[]string{"get", crdV1beta1}, []string{"NAME", "REPLICAS", "COLOR", "AGE"}, []map[string]string{
			{"NAME": "full", "REPLICAS": "3", "COLOR": "green", "AGE": age},
			{"NAME": "plain", "REPLICAS": "1", "COLOR": "blue", "AGE": age},
		}, true},
	} {
		what := "kubectl " + strings.Join(tc.args, " ")
		r := runKubectl(t, "", append(tc.args, "-n", ns)...)
		if r.err != nil {
			t.Errorf("%s: %v\n%s", what, r.err, r.stderr)
			continue
		}
		tb := parseTable(t, r.stdout)
		if !reflect.DeepEqual(tb.header, tc.header) {
			t.Errorf("%s: header %q, want %q\n%s", what, tb.header, tc.header, r.stdout)
			continue
		}
		if len(tb.rows) != len(tc.rows) {
			t.Errorf("%s: %d rows, want %d\n%s", what, len(tb.rows), len(tc.rows), r.stdout)
		}
		for _, row := range tc.rows {
			requireRow(t, what, tb, row)
		}
		if got := strings.TrimSpace(r.stderr); tc.warning && got != crdWarning || !tc.warning && got != "" {
			t.Errorf("%s: stderr %q, want %q", what, got, map[bool]string{true: crdWarning}[tc.warning])
		}
	}
}

// testCRDExplain describes the schema with kubectl explain, which reads
// the CRD's OpenAPI v3 through the aggregator.
func testCRDExplain(t *testing.T, ns string) {
	for _, tc := range []struct {
		args []string
		want []string // lines (or parts of lines) of the output
	}{
		{[]string{"explain", crdPlural + ".spec"}, []string{
			"GROUP:      " + crdGroup,
			"KIND:       Widget",
			"VERSION:    v1",
			"FIELD: spec <Object>",
			"WidgetSpec is the desired state of a Widget.",
			"color\t<string>",
			"Color the widget is painted in; blue when unset.",
			"maxReplicas\t<integer>",
			"MaxReplicas caps replicas; 10 when unset.",
			"replicas\t<integer> -required-",
			"Replicas is the number of widget copies to run.",
		}},
		{[]string{"explain", "wdg"}, []string{
			"KIND:       Widget",
			"Widget is the custom resource of the kubeboot e2e tests.",
			"spec\t<Object>",
			"status\t<Object>",
			"WidgetStatus is the observed state of a Widget.",
		}},
		{[]string{"explain", crdPlural + ".status.phase", "--api-version=" + crdGroup + "/v1beta1"}, []string{
			"VERSION:    v1beta1",
			"FIELD: phase <string>",
			"Phase is where the widget is in its life.",
		}},
	} {
		out := kubectl(t, tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("kubectl %s: output lacks %q:\n%s", strings.Join(tc.args, " "), w, out)
			}
		}
	}
}

// testCRDDefaults reads back the schema defaults of plain, the explicit
// values of full, and creates an object with unknown fields without
// client validation: the server prunes them.
func testCRDDefaults(t *testing.T, ns string) {
	for name, want := range map[string]string{
		"plain": "1/10/blue", // maxReplicas and color defaulted
		"full":  "3/4/green", // set: the defaults do not apply
	} {
		if got := widgetField(t, ns, name, "{.spec.replicas}/{.spec.maxReplicas}/{.spec.color}"); got != want {
			t.Errorf("widget %s: replicas/maxReplicas/color %q, want %q", name, got, want)
		}
	}

	// The defaults are in storage, not applied on the way out only: the
	// managed fields of the creating apply list them.
	var plain struct {
		Metadata struct {
			ManagedFields []struct {
				Manager  string `json:"manager"`
				FieldsV1 struct {
					Spec map[string]any `json:"f:spec"`
				} `json:"fieldsV1"`
			} `json:"managedFields"`
		} `json:"metadata"`
	}
	getJSON(t, &plain, "get", "widget", "plain", "-n", ns, "-o", "json", "--show-managed-fields")
	if mf := plain.Metadata.ManagedFields; len(mf) != 1 {
		t.Errorf("widget plain: %d managedFields entries, want the creating apply's", len(mf))
	} else {
		for _, f := range []string{"f:color", "f:maxReplicas", "f:replicas"} {
			if _, ok := mf[0].FieldsV1.Spec[f]; !ok {
				t.Errorf("widget plain: the fields of %s lack %s: %v", mf[0].Manager, f, mf[0].FieldsV1.Spec)
			}
		}
	}

	// Unknown fields: refused by server-side strict validation, pruned
	// when kubectl does not ask for validation.
	manifest := widgetManifest("v1", "pruned", `{"replicas": 1, "shape": "round"}`) + "extra: 1\n"
	stderr := kubectlFails(t, manifest, "create", "-n", ns, "-f", "-")
	if want := `strict decoding error: unknown field "extra", unknown field "spec.shape"`; !strings.Contains(stderr, want) {
		t.Errorf("kubectl create with unknown fields: stderr %q lacks %q", stderr, want)
	}
	requireNoWidget(t, ns, "pruned")
	kubectlStdin(t, manifest, "create", "--validate=false", "-n", ns, "-f", "-")
	var obj map[string]any
	getJSON(t, &obj, "get", "widget", "pruned", "-n", ns, "-o", "json")
	if _, ok := obj["extra"]; ok {
		t.Errorf("widget pruned: unknown top-level field extra kept: %v", obj)
	}
	if spec, _ := obj["spec"].(map[string]any); !reflect.DeepEqual(spec, map[string]any{"replicas": 1.0, "maxReplicas": 10.0, "color": "blue"}) {
		t.Errorf("widget pruned: spec %v, want the unknown field shape pruned and the defaults applied", spec)
	}
}

// testCRDInvalid creates and updates widgets that break the OpenAPI schema
// or the CEL rule: kubectl prints the field paths and messages, and
// nothing is created or changed.
func testCRDInvalid(t *testing.T, ns string) {
	for _, tc := range []struct {
		name string
		spec string
		want []string // parts of kubectl's stderr
	}{
		{"negative", `{"replicas": -1}`, []string{
			`The Widget "negative" is invalid: `,
			"spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
			// The scale subresource's specReplicasPath check.
			".spec.replicas: Invalid value: -1: should be a non-negative integer",
		}},
		{"wrong-type", `{"replicas": "three"}`, []string{
			`The Widget "wrong-type" is invalid: `,
			`spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`,
		}},
		{"missing", `{"color": "red"}`, []string{
			`The Widget "missing" is invalid: `,
			"spec.replicas: Required value",
		}},
		// The CEL rule, with maxReplicas defaulted to 10 and set.
		{"over-default-max", `{"replicas": 11}`, []string{
			`The Widget "over-default-max" is invalid: spec: Invalid value: replicas must not exceed maxReplicas`,
		}},
		{"over-max", `{"replicas": 5, "maxReplicas": 4}`, []string{
			`The Widget "over-max" is invalid: spec: Invalid value: replicas must not exceed maxReplicas`,
		}},
	} {
		stderr := kubectlFails(t, widgetManifest("v1", tc.name, tc.spec), "create", "-n", ns, "-f", "-")
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("kubectl create widget %s %s: stderr lacks %q:\n%s", tc.name, tc.spec, w, stderr)
			}
		}
		requireNoWidget(t, ns, tc.name)
	}

	// The rule holds on update too: full has replicas 3.
	stderr := kubectlFails(t, "", "patch", "widget", "full", "-n", ns, "--type=merge", "-p", `{"spec":{"maxReplicas":2}}`)
	if want := `The Widget "full" is invalid: spec: Invalid value: replicas must not exceed maxReplicas`; stderr != want {
		t.Errorf("patch breaking the CEL rule: stderr %q, want %q", stderr, want)
	}
	if got := widgetField(t, ns, "full", "{.spec.maxReplicas}"); got != "4" {
		t.Errorf("after the refused patch widget full has maxReplicas %q, want 4", got)
	}
}

// widget is the part of a Widget the versions step compares.
type widget struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
		UID  string `json:"uid"`
	} `json:"metadata"`
	Spec map[string]any `json:"spec"`
}

// testCRDVersions reads each widget through the version it was not created
// in: with conversion strategy None only apiVersion changes.
func testCRDVersions(t *testing.T, ns string) {
	for _, tc := range []struct {
		name, created, read string
		spec                string
	}{
		{"from-v1", "v1", "v1beta1", `{"replicas": 2, "color": "red"}`},
		{"from-v1beta1", "v1beta1", "v1", `{"replicas": 4, "maxReplicas": 6}`},
	} {
		kubectlStdin(t, widgetManifest(tc.created, tc.name, tc.spec), "create", "-n", ns, "-f", "-")
		resource := map[string]string{"v1": crdPlural + ".v1." + crdGroup, "v1beta1": crdV1beta1}
		var asCreated, asRead, raw widget
		getJSON(t, &asCreated, "get", resource[tc.created], tc.name, "-n", ns, "-o", "json")
		stderr := getJSON(t, &asRead, "get", resource[tc.read], tc.name, "-n", ns, "-o", "json")
		getJSON(t, &raw, "get", "--raw", widgetPath(tc.read, ns, tc.name))

		for what, w := range map[string]widget{"kubectl get " + resource[tc.read]: asRead, "GET " + widgetPath(tc.read, ns, tc.name): raw} {
			if w.APIVersion != crdGroup+"/"+tc.read || w.Kind != "Widget" {
				t.Errorf("%s: %s %s, want %s/%s Widget", what, w.APIVersion, w.Kind, crdGroup, tc.read)
			}
			if w.Metadata.Name != tc.name || w.Metadata.UID != asCreated.Metadata.UID {
				t.Errorf("%s: name %q uid %q, want %q %q", what, w.Metadata.Name, w.Metadata.UID, tc.name, asCreated.Metadata.UID)
			}
			if !reflect.DeepEqual(w.Spec, asCreated.Spec) {
				t.Errorf("%s: spec %v, want %v as read through %s", what, w.Spec, asCreated.Spec, tc.created)
			}
		}
		if tc.read == "v1beta1" && !strings.Contains(stderr, crdWarning) {
			t.Errorf("kubectl get %s: stderr %q lacks the deprecation warning %q", resource[tc.read], stderr, crdWarning)
		}
		if tc.read == "v1" && stderr != "" {
			t.Errorf("kubectl get %s: stderr %q, want none", resource[tc.read], stderr)
		}
	}

	// A list through v1beta1 has the objects in v1beta1 too.
	var list struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Items      []widget `json:"items"`
	}
	getJSON(t, &list, "get", "--raw", widgetPath("v1beta1", ns))
	if list.APIVersion != crdGroup+"/v1beta1" || list.Kind != "WidgetList" {
		t.Errorf("GET %s: %s %s, want %s/v1beta1 WidgetList", widgetPath("v1beta1", ns), list.APIVersion, list.Kind, crdGroup)
	}
	for _, it := range list.Items {
		if it.APIVersion != crdGroup+"/v1beta1" {
			t.Errorf("GET %s: item %s has apiVersion %s", widgetPath("v1beta1", ns), it.Metadata.Name, it.APIVersion)
		}
	}
}

// testCRDStatus writes the status through the subresource, then checks
// that the main resource ignores status and the subresource ignores spec.
func testCRDStatus(t *testing.T, ns string) {
	kubectlStdin(t, widgetManifest("v1", "stat", `{"replicas": 1}`), "create", "-n", ns, "-f", "-")
	const fields = "{.spec.color}|{.status.phase}/{.status.replicas}|{.metadata.generation}"
	for _, step := range []struct {
		what        string
		subresource bool
		patch       string
		out         string // what kubectl prints
		want        string // fields after the patch
	}{
		{"status through the subresource", true, `{"status":{"phase":"Running","replicas":1}}`,
			"patched", "blue|Running/1|1"},
		{"status through the main resource", false, `{"status":{"phase":"Hacked","replicas":9}}`,
			"patched (no change)", "blue|Running/1|1"},
		{"spec through the status subresource", true, `{"spec":{"color":"red"}}`,
			"patched (no change)", "blue|Running/1|1"},
		{"spec through the main resource", false, `{"spec":{"color":"red"}}`,
			"patched", "red|Running/1|2"},
	} {
		args := []string{"patch", "widget", "stat", "-n", ns, "--type=merge", "-p", step.patch}
		if step.subresource {
			args = append(args, "--subresource=status")
		}
		if out := strings.TrimSpace(kubectl(t, args...)); out != crdTypeName+"/stat "+step.out {
			t.Errorf("%s: kubectl printed %q, want %q", step.what, out, crdTypeName+"/stat "+step.out)
		}
		if got := widgetField(t, ns, "stat", fields); got != step.want {
			t.Errorf("%s: color|phase/replicas|generation %q, want %q", step.what, got, step.want)
		}
	}
	tb := parseTable(t, kubectl(t, "get", crdPlural, "stat", "-n", ns))
	requireRow(t, "kubectl get widgets stat", tb, map[string]string{"NAME": "stat", "REPLICAS": "1", "COLOR": "red", "PHASE": "Running", "AGE": age})
}

// scale is an autoscaling/v1 Scale.
type scale struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Replicas int32 `json:"replicas"`
	} `json:"spec"`
	Status struct {
		Replicas int32  `json:"replicas"`
		Selector string `json:"selector"`
	} `json:"status"`
}

// testCRDScale scales a widget with kubectl scale and reads the Scale
// through both versions.
func testCRDScale(t *testing.T, ns string) {
	kubectlStdin(t, widgetManifest("v1", "scaled", `{"replicas": 1}`), "create", "-n", ns, "-f", "-")
	kubectl(t, "patch", "widget", "scaled", "-n", ns, "--subresource=status", "--type=merge",
		"-p", `{"status":{"replicas":1,"selector":"app=scaled"}}`)
	out := kubectl(t, "scale", crdPlural+"/scaled", "-n", ns, "--replicas=5")
	if want := crdTypeName + "/scaled scaled"; strings.TrimSpace(out) != want {
		t.Errorf("kubectl scale --replicas=5: printed %q, want %q", out, want)
	}
	if got := widgetField(t, ns, "scaled", "{.spec.replicas}/{.metadata.generation}"); got != "5/2" {
		t.Errorf("after kubectl scale --replicas=5: spec.replicas/generation %q, want 5/2", got)
	}
	for _, version := range []string{"v1", "v1beta1"} {
		path := widgetPath(version, ns, "scaled", "scale")
		var s scale
		getJSON(t, &s, "get", "--raw", path)
		var want scale
		want.APIVersion, want.Kind = "autoscaling/v1", "Scale"
		want.Metadata.Name, want.Metadata.Namespace = "scaled", ns
		want.Spec.Replicas, want.Status.Replicas, want.Status.Selector = 5, 1, "app=scaled"
		if s != want {
			t.Errorf("GET %s:\n  got  %+v\n  want %+v", path, s, want)
		}
	}
	// The scale subresource validates the whole object: the CEL rule too.
	stderr := kubectlFails(t, "", "scale", crdPlural+"/scaled", "-n", ns, "--replicas=11")
	if want := `The Widget "scaled" is invalid: spec: Invalid value: replicas must not exceed maxReplicas`; stderr != want {
		t.Errorf("kubectl scale --replicas=11: stderr %q, want %q", stderr, want)
	}
	if got := widgetField(t, ns, "scaled", "{.spec.replicas}"); got != "5" {
		t.Errorf("after the refused scale spec.replicas %q, want 5", got)
	}
}

// testCRDStopServing stops serving v1beta1: its APIService goes and its
// path is NotFound, v1 still serves; serving it again brings it back.
func testCRDStopServing(t *testing.T, ns string) {
	setServed := func(served bool) {
		t.Helper()
		kubectl(t, "patch", "crd", crdName, "--type=json", "-p",
			`[{"op":"test","path":"/spec/versions/1/name","value":"v1beta1"},{"op":"replace","path":"/spec/versions/1/served","value":`+strconv.FormatBool(served)+`}]`)
	}
	setServed(false)
	eventually(t, crdPollTimeout, "v1beta1."+crdGroup+" gone and its path NotFound", func() (bool, string) {
		r := runKubectl(t, "", "get", "apiservice", "v1beta1."+crdGroup)
		if r.err == nil {
			return false, "APIService still there: " + r.stdout
		}
		if code, body := apiRequest(t, http.MethodGet, widgetPath("v1beta1", ns, "full"), nil); code != http.StatusNotFound {
			return false, "GET v1beta1 full: HTTP " + http.StatusText(code) + ": " + string(body)
		}
		return true, ""
	})
	if got := widgetField(t, ns, "full", "{.spec.replicas}"); got != "3" {
		t.Errorf("with v1beta1 not served, widget full through v1: spec.replicas %q, want 3", got)
	}
	setServed(true)
	eventually(t, crdPollTimeout, "v1beta1."+crdGroup+" back", func() (bool, string) {
		r := runKubectl(t, "", "get", "apiservice", "v1beta1."+crdGroup, "-o", "jsonpath={.status.conditions[?(@.type==\"Available\")].status}")
		if r.err != nil || r.stdout != "True" {
			return false, r.cmdline + ": " + r.stdout + r.stderr
		}
		code, body := apiRequest(t, http.MethodGet, widgetPath("v1beta1", ns, "full"), nil)
		return code == http.StatusOK, "GET v1beta1 full: " + http.StatusText(code) + ": " + string(body)
	})
}

// testCRDDelete deletes the CRD: kubectl waits until its objects are gone
// and the CRD with them; the paths are NotFound, the APIServices go, and
// the same CRD applied again has no objects.
func testCRDDelete(t *testing.T, ns string) {
	if names := kubectl(t, "get", crdPlural, "-A", "-o", "name"); len(strings.Fields(names)) < 5 {
		t.Fatalf("before the delete: widgets %q, want the ones the earlier steps created", names)
	}
	out := kubectl(t, "delete", "crd", crdName)
	if want := `customresourcedefinition.apiextensions.k8s.io "` + crdName + `" deleted`; strings.TrimSpace(out) != want {
		t.Errorf("kubectl delete crd: printed %q, want %q", out, want)
	}
	want := `Error from server (NotFound): customresourcedefinitions.apiextensions.k8s.io "` + crdName + `" not found`
	if stderr := kubectlFails(t, "", "get", "crd", crdName); stderr != want {
		t.Errorf("kubectl get crd after the delete: stderr %q, want %q", stderr, want)
	}
	for _, path := range []string{widgetPath("v1", ns), widgetPath("v1", ns, "full"), widgetPath("v1beta1", ns, "plain")} {
		stderr := kubectlFails(t, "", "get", "--raw", path)
		if want := "Error from server (NotFound): the server could not find the requested resource"; stderr != want {
			t.Errorf("kubectl get --raw %s after the delete: stderr %q, want %q", path, stderr, want)
		}
		// The path is unknown now: the end of the chain answers, with
		// net/http's text 404 as in kube-apiserver, not a Status.
		if code, body := apiRequest(t, http.MethodGet, path, nil); code != http.StatusNotFound {
			t.Errorf("GET %s after the delete: HTTP %d, want 404\n%s", path, code, body)
		}
	}
	eventually(t, crdPollTimeout, "APIServices of "+crdGroup+" removed", func() (bool, string) {
		names := kubectl(t, "get", "apiservices", "-o", "name")
		if strings.Contains(names, "."+crdGroup+"\n") {
			return false, "still listed:\n" + names
		}
		return true, ""
	})

	kubectl(t, "apply", "-f", crdFile)
	r, elapsed, _ := pollKubectl(t, time.Now(), crdPollTimeout, "get", crdPlural, "-A", "-o", "name")
	t.Logf("re-created CRD usable after %s", elapsed.Round(time.Millisecond))
	if r.stdout != "" {
		t.Errorf("the re-created CRD has objects of the deleted one:\n%s", r.stdout)
	}
	var list struct {
		Items []widget `json:"items"`
	}
	getJSON(t, &list, "get", "--raw", widgetPath("v1", ns))
	if len(list.Items) != 0 {
		t.Errorf("GET %s on the re-created CRD: %d items, want 0", widgetPath("v1", ns), len(list.Items))
	}
	code, body := apiRequest(t, http.MethodGet, widgetPath("v1", ns, "full"), nil)
	if code != http.StatusNotFound {
		t.Errorf("GET %s on the re-created CRD: HTTP %d, want 404\n%s", widgetPath("v1", ns, "full"), code, body)
	} else if st := decodeStatus(t, body); st.Message != crdName+` "full" not found` {
		t.Errorf("GET %s on the re-created CRD: message %q", widgetPath("v1", ns, "full"), st.Message)
	}
	out = kubectl(t, "delete", "crd", crdName)
	if want := `customresourcedefinition.apiextensions.k8s.io "` + crdName + `" deleted`; strings.TrimSpace(out) != want {
		t.Errorf("kubectl delete crd (re-created): printed %q, want %q", out, want)
	}
}
