package badinput

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The namespace and objects the bad requests aim at.
const (
	testNamespace = "badinput"
	nsPath        = "/api/v1/namespaces/" + testNamespace
	cmPath        = nsPath + "/configmaps"
	targetPath    = cmPath + "/target"
	svcPath       = nsPath + "/services"
	webPath       = svcPath + "/web"
)

// Content types.
const (
	ctJSON     = "application/json"
	ctYAML     = "application/yaml"
	ctProto    = "application/vnd.kubernetes.protobuf"
	ctJSONPat  = "application/json-patch+json"
	ctMerge    = "application/merge-patch+json"
	ctSMP      = "application/strategic-merge-patch+json"
	ctApply    = "application/apply-patch+yaml"
	ctApplyCBR = "application/apply-patch+cbor"
)

// any4xx accepts any client error: used where kube-apiserver's exact code
// is not pinned down here (or where kube-apiserver itself answers 500, see
// the case's comment) but a 4xx is the contract.
var any4xx []int

// apiCase is one bad request.
type apiCase struct {
	name        string
	method      string
	path        string // below the server URL, with the query
	contentType string // default application/json when body is set
	body        []byte
	// want lists the acceptable codes (what kube-apiserver answers); nil
	// accepts any 4xx.
	want []int
}

// fixtures are the objects the cases aim at, created before the first
// snapshot.
type fixtures struct {
	targetRV  string // resourceVersion of ConfigMap target
	targetUID string
	webRV     string // resourceVersion of Service web
}

// TestBadRequests sends each bad request to an in-process server and
// requires a 4xx Status (the code kube-apiserver answers where the case
// names one), no dropped connection, /readyz 200 after every case, and
// etcd unchanged after the batch.
func TestBadRequests(t *testing.T) {
	srv := startServer(t)
	admin := httpClientFor(t, srv.Config)
	anon := anonymousClient(t, srv.Config)
	fx := createFixtures(t, srv.Config)

	cli := etcdClient(t, srv.DataDir)
	before := settledSnapshot(t, cli)
	// The snapshot must see the fixtures, or it is reading the wrong etcd.
	for _, k := range []string{"/registry/namespaces/" + testNamespace, "/registry/configmaps/" + testNamespace + "/target", "/registry/services/specs/" + testNamespace + "/web"} {
		if _, ok := before[k]; !ok {
			t.Fatalf("etcd snapshot lacks fixture key %s", k)
		}
	}

	for _, tc := range apiCases(fx) {
		t.Run(tc.name, func(t *testing.T) {
			r, err := send(admin, tc.method, srv.URL+tc.path, tc.contentType, tc.body)
			if err != nil {
				t.Fatalf("%s %.120s: no HTTP answer (dropped connection?): %v", tc.method, tc.path, err)
			}
			checkCode(t, tc, r)
			requireReady(t, anon, srv.URL, tc.name)
		})
	}

	after := snapshot(t, cli)
	if diff := diffSnapshots(before, after); len(diff) > 0 {
		t.Errorf("refused requests changed what etcd stores:\n  %s", strings.Join(diff, "\n  "))
	}
}

// checkCode requires a 4xx Status with one of tc.want's codes.
func checkCode(t *testing.T, tc apiCase, r response) {
	t.Helper()
	what := fmt.Sprintf("%s %.150s (%s, %d bytes)", tc.method, tc.path, tc.contentType, len(tc.body))
	if r.code < 400 || r.code > 499 {
		t.Errorf("%s: HTTP %d, want a 4xx: %.400s", what, r.code, r.body)
		return
	}
	if tc.want != nil && !containsInt(tc.want, r.code) {
		t.Errorf("%s: HTTP %d, want %v (as kube-apiserver): %.400s", what, r.code, tc.want, r.body)
	}
	if _, err := statusOf(r); err != nil {
		t.Errorf("%s: HTTP %d: %v", what, r.code, err)
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// createFixtures creates the namespace, ConfigMaps target and victim and
// the NodePort Service web.
func createFixtures(t *testing.T, cfg *rest.Config) fixtures {
	t.Helper()
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	target, err := client.CoreV1().ConfigMaps(testNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "target", Labels: map[string]string{"app": "target"}},
		Data:       map[string]string{"a": "1"},
	}, metav1.CreateOptions{FieldManager: "fixture"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().ConfigMaps(testNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "victim", Labels: map[string]string{"app": "victim"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web, err := client.CoreV1().Services(testNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeNodePort,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "https", Port: 443}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return fixtures{targetRV: target.ResourceVersion, targetUID: string(target.UID), webRV: web.ResourceVersion}
}

// apiCases lists the bad requests, grouped as the brief lists them. The
// wanted codes are kube-apiserver 1.36's.
func apiCases(fx fixtures) []apiCase {
	var cases []apiCase
	add := func(cs ...apiCase) { cases = append(cases, cs...) }
	watch := "watch=true&timeoutSeconds=1&"

	// Malformed JSON: the decoder fails, 400 BadRequest.
	add(
		apiCase{name: "json/truncated", method: "POST", path: cmPath, body: []byte(`{"apiVersion":"v1","kind":`), want: []int{400}},
		apiCase{name: "json/trailing comma", method: "POST", path: cmPath, body: []byte(cm(`"name":"x"`, `,`)), want: []int{400}},
		apiCase{name: "json/not json", method: "POST", path: cmPath, body: []byte(`this is not json`), want: []int{400}},
		apiCase{name: "json/empty body", method: "POST", path: cmPath, body: []byte{}, want: []int{400}},
		apiCase{name: "json/nul bytes", method: "POST", path: cmPath, body: []byte("{\x00\x00\x00}"), want: []int{400}},
		apiCase{name: "json/number for a string map", method: "POST", path: cmPath, body: []byte(cm(`"name":"x"`, `,"data":{"a":1}`)), want: []int{400}},
		apiCase{name: "json/array for metadata", method: "POST", path: cmPath, body: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":[]}`), want: []int{400}},
		apiCase{name: "json/truncated update", method: "PUT", path: targetPath, body: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"target"`), want: []int{400}},
		apiCase{name: "json/truncated namespace", method: "POST", path: "/api/v1/namespaces", body: []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":`), want: []int{400}},
		apiCase{name: "json/truncated service", method: "POST", path: svcPath, body: []byte(`{"apiVersion":"v1","kind":"Service","spec":{"ports":[{"port":`), want: []int{400}},
	)

	// Malformed YAML (Content-Type application/yaml): 400.
	add(
		apiCase{name: "yaml/unclosed flow sequence", method: "POST", path: cmPath, contentType: ctYAML, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [x\n"), want: []int{400}},
		apiCase{name: "yaml/tab indentation", method: "POST", path: cmPath, contentType: ctYAML, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: x\n"), want: []int{400}},
		apiCase{name: "yaml/bad mapping", method: "POST", path: cmPath, contentType: ctYAML, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: name: x: y\n"), want: []int{400}},
		apiCase{name: "yaml/unknown alias", method: "POST", path: cmPath, contentType: ctYAML, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: *nope\n"), want: []int{400}},
		apiCase{name: "yaml/alias bomb", method: "POST", path: cmPath, contentType: ctYAML, body: []byte(yamlAliasBomb()), want: []int{400}},
		apiCase{name: "yaml/scalar document", method: "POST", path: cmPath, contentType: ctYAML, body: []byte("just a string\n"), want: []int{400}},
		apiCase{name: "yaml/invalid update", method: "PUT", path: targetPath, contentType: ctYAML, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: target\n"), want: []int{400}},
	)

	// Malformed protobuf: 400.
	add(
		apiCase{name: "protobuf/garbage", method: "POST", path: cmPath, contentType: ctProto, body: []byte("\x0a\xff\xff\xff\xff\x0fgarbage\x00\x01\x02"), want: []int{400}},
		apiCase{name: "protobuf/magic then garbage", method: "POST", path: cmPath, contentType: ctProto, body: []byte("k8s\x00\xff\xfe\xfd\xfc garbage \x0a\x80"), want: []int{400}},
		apiCase{name: "protobuf/magic only", method: "POST", path: cmPath, contentType: ctProto, body: []byte("k8s\x00"), want: []int{400}},
		apiCase{name: "protobuf/envelope with garbage object", method: "POST", path: cmPath, contentType: ctProto, body: protoEnvelope("v1", "ConfigMap", []byte("\x0a\x05\x0a\x03\xff\xff")), want: []int{400}},
		apiCase{name: "protobuf/envelope of the wrong kind", method: "POST", path: cmPath, contentType: ctProto, body: protoEnvelope("v1", "Secret", mustMarshal(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x"}})), want: []int{400}},
		apiCase{name: "protobuf/invalid name", method: "POST", path: cmPath, contentType: ctProto, body: protoEnvelope("v1", "ConfigMap", mustMarshal(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name"}})), want: []int{422}},
		apiCase{name: "protobuf/garbage update", method: "PUT", path: targetPath, contentType: ctProto, body: []byte("k8s\x00\x0a\x02\x0a"), want: []int{400}},
	)

	// The wrong kind for the endpoint: 400.
	add(
		apiCase{name: "kind/secret to configmaps", method: "POST", path: cmPath, body: []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}`), want: []int{400}},
		apiCase{name: "kind/namespace to configmaps", method: "POST", path: cmPath, body: []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}`), want: []int{400}},
		apiCase{name: "kind/list to configmaps", method: "POST", path: cmPath, body: []byte(`{"apiVersion":"v1","kind":"ConfigMapList","items":[]}`), want: []int{400}},
		apiCase{name: "kind/unregistered kind", method: "POST", path: cmPath, body: []byte(`{"apiVersion":"v1","kind":"Bogus","metadata":{"name":"x"}}`), want: []int{400}},
		apiCase{name: "kind/configmap to services (yaml)", method: "POST", path: svcPath, contentType: ctYAML, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"), want: []int{400}},
		apiCase{name: "kind/lease to namespaces", method: "POST", path: "/api/v1/namespaces", body: []byte(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"x"}}`), want: []int{400}},
		apiCase{name: "kind/secret update of a configmap", method: "PUT", path: targetPath, body: []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"target","resourceVersion":"` + fx.targetRV + `"}}`), want: []int{400}},
	)

	// A wrong or unknown apiVersion in the body: 400.
	add(
		apiCase{name: "version/unknown version", method: "POST", path: cmPath, body: []byte(`{"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"x"}}`), want: []int{400}},
		apiCase{name: "version/other group", method: "POST", path: cmPath, body: []byte(`{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"x"}}`), want: []int{400}},
		apiCase{name: "version/unknown group", method: "POST", path: cmPath, body: []byte(`{"apiVersion":"example.com/v1","kind":"ConfigMap","metadata":{"name":"x"}}`), want: []int{400}},
		apiCase{name: "version/malformed", method: "POST", path: cmPath, body: []byte(`{"apiVersion":"a/b/c","kind":"ConfigMap","metadata":{"name":"x"}}`), want: []int{400}},
		apiCase{name: "version/lease as v1beta9", method: "POST", path: "/apis/coordination.k8s.io/v1/namespaces/" + testNamespace + "/leases", body: []byte(`{"apiVersion":"coordination.k8s.io/v1beta9","kind":"Lease","metadata":{"name":"x"}}`), want: []int{400}},
	)

	// Bodies over the 3 MiB request limit: 413.
	add(
		apiCase{name: "size/create 3 MiB + 1", method: "POST", path: cmPath, body: bigConfigMap("big", 3<<20+1), want: []int{413}},
		apiCase{name: "size/create 4 MiB", method: "POST", path: cmPath, body: bigConfigMap("big", 4<<20), want: []int{413}},
		apiCase{name: "size/update 4 MiB", method: "PUT", path: targetPath, body: bigConfigMap("target", 4<<20), want: []int{413}},
		apiCase{name: "size/merge patch 4 MiB", method: "PATCH", path: targetPath, contentType: ctMerge, body: []byte(`{"data":{"a":"` + strings.Repeat("x", 4<<20) + `"}}`), want: []int{413}},
		apiCase{name: "size/yaml create 4 MiB", method: "POST", path: cmPath, contentType: ctYAML, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  a: " + strings.Repeat("x", 4<<20) + "\n"), want: []int{413}},
	)

	// Deeply nested documents: the decoders' depth limits answer 400;
	// nothing may crash or hang.
	const depth = 100000
	add(
		apiCase{name: "nesting/arrays in data", method: "POST", path: cmPath, body: []byte(cm(`"name":"deep"`, `,"data":{"a":`+nestedArrays(depth)+`}`)), want: []int{400}},
		apiCase{name: "nesting/objects in an unknown field", method: "POST", path: cmPath, body: []byte(cm(`"name":"deep"`, `,"spec":`+nestedObjects(depth))), want: []int{400}},
		apiCase{name: "nesting/objects in annotations", method: "POST", path: cmPath, body: []byte(cm(`"name":"deep","annotations":`+nestedObjects(depth), ``)), want: []int{400}},
		apiCase{name: "nesting/yaml flow sequences", method: "POST", path: cmPath, contentType: ctYAML, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:\n  a: " + nestedArrays(depth) + "\n"), want: []int{400}},
		apiCase{name: "nesting/merge patch", method: "PATCH", path: targetPath, contentType: ctMerge, body: []byte(`{"data":` + nestedObjects(depth) + `}`), want: []int{400, 422}},
		apiCase{name: "nesting/strategic merge patch", method: "PATCH", path: targetPath, contentType: ctSMP, body: []byte(`{"metadata":{"labels":` + nestedObjects(depth) + `}}`), want: []int{400, 422}},
		apiCase{name: "nesting/json patch value", method: "PATCH", path: targetPath, contentType: ctJSONPat, body: []byte(`[{"op":"add","path":"/data/b","value":` + nestedArrays(depth) + `}]`), want: []int{400, 422}},
		apiCase{name: "nesting/apply", method: "PATCH", path: targetPath + "?fieldManager=bad", contentType: ctApply, body: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"target"},"data":` + nestedObjects(depth) + `}`), want: []int{400, 422}},
	)

	// Invalid UTF-8 in names, labels and data keys. The JSON decoder turns
	// each invalid byte into U+FFFD, which validation refuses: 422. YAML
	// refuses invalid UTF-8 outright: 400.
	add(
		apiCase{name: "utf8/name", method: "POST", path: cmPath, body: []byte(cm(`"name":"a`+"\xff\xfe"+`b"`, ``)), want: []int{422}},
		apiCase{name: "utf8/generateName", method: "POST", path: cmPath, body: []byte(cm(`"generateName":"a`+"\xc3\x28"+`-"`, ``)), want: []int{422}},
		apiCase{name: "utf8/namespace name", method: "POST", path: "/api/v1/namespaces", body: []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ns` + "\xed\xa0\x80" + `"}}`), want: []int{422}},
		apiCase{name: "utf8/label key", method: "POST", path: cmPath, body: []byte(cm(`"name":"u1","labels":{"k`+"\xff"+`":"v"}`, ``)), want: []int{422}},
		apiCase{name: "utf8/label value", method: "POST", path: cmPath, body: []byte(cm(`"name":"u2","labels":{"k":"v`+"\xff"+`"}`, ``)), want: []int{422}},
		apiCase{name: "utf8/annotation key", method: "POST", path: cmPath, body: []byte(cm(`"name":"u3","annotations":{"`+"\x80"+`":"v"}`, ``)), want: []int{422}},
		apiCase{name: "utf8/data key", method: "POST", path: cmPath, body: []byte(cm(`"name":"u4"`, `,"data":{"k`+"\xf8\x88\x80\x80\x80"+`":"v"}`)), want: []int{422}},
		apiCase{name: "utf8/label value on update", method: "PUT", path: targetPath, body: []byte(cm(`"name":"target","resourceVersion":"`+fx.targetRV+`","labels":{"app":"t`+"\xff"+`"}`, ``)), want: []int{422}},
		apiCase{name: "utf8/label value in merge patch", method: "PATCH", path: targetPath, contentType: ctMerge, body: []byte(`{"metadata":{"labels":{"app":"` + "\xff" + `"}}}`), want: []int{422}},
		apiCase{name: "utf8/yaml name", method: "POST", path: cmPath, contentType: ctYAML, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\xffb\n"), want: []int{400}},
		apiCase{name: "utf8/name in the URL", method: "PUT", path: cmPath + "/a%FFb", body: []byte(cm(`"name":"a`+"\xff"+`b"`, ``)), want: any4xx},
	)

	// Huge label maps and over-long label values: 422.
	add(
		apiCase{name: "labels/10000 labels and one value of 64 chars", method: "POST", path: cmPath, body: []byte(cm(`"name":"many","labels":`+labels(10000, strings.Repeat("v", 64)), ``)), want: []int{422}},
		apiCase{name: "labels/5000 invalid keys", method: "POST", path: cmPath, body: []byte(cm(`"name":"many","labels":`+invalidLabels(5000), ``)), want: []int{422}},
		apiCase{name: "labels/value of 64 chars", method: "POST", path: cmPath, body: []byte(cm(`"name":"long","labels":{"a":"`+strings.Repeat("x", 64)+`"}`, ``)), want: []int{422}},
		apiCase{name: "labels/value of 64 chars on update", method: "PUT", path: targetPath, body: []byte(cm(`"name":"target","resourceVersion":"`+fx.targetRV+`","labels":{"a":"`+strings.Repeat("x", 64)+`"}`, ``)), want: []int{422}},
		apiCase{name: "labels/value of 64 chars in merge patch", method: "PATCH", path: targetPath, contentType: ctMerge, body: []byte(`{"metadata":{"labels":{"a":"` + strings.Repeat("x", 64) + `"}}}`), want: []int{422}},
		apiCase{name: "labels/10000 labels and one value of 64 chars in strategic merge patch", method: "PATCH", path: targetPath, contentType: ctSMP, body: []byte(`{"metadata":{"labels":` + labels(10000, strings.Repeat("v", 64)) + `}}`), want: []int{422}},
		apiCase{name: "labels/key of 64 chars on a namespace", method: "POST", path: "/api/v1/namespaces", body: []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"labelled","labels":{"` + strings.Repeat("k", 64) + `":"v"}}}`), want: []int{422}},
	)

	// Invalid field and label selectors on list, watch and
	// deletecollection: 400 (and deletecollection must delete nothing).
	selectors := []struct{ name, query string }{
		{"field selector on an unknown field", "fieldSelector=" + url.QueryEscape("spec.foo=bar")},
		{"field selector without an operator", "fieldSelector=" + url.QueryEscape("metadata.name")},
		{"field selector with a dangling escape", "fieldSelector=" + url.QueryEscape(`metadata.name=a\`)},
		{"label selector with an unclosed set", "labelSelector=" + url.QueryEscape("app in (a")},
		{"label selector of punctuation", "labelSelector=" + url.QueryEscape("!!!")},
		{"label selector with two operators", "labelSelector=" + url.QueryEscape("app=a=b")},
		{"label selector with a key over 63 chars", "labelSelector=" + url.QueryEscape(strings.Repeat("k", 64)+"=v")},
		{"label selector with a value over 63 chars", "labelSelector=" + url.QueryEscape("app="+strings.Repeat("v", 64))},
	}
	for _, s := range selectors {
		add(
			apiCase{name: "selectors/list configmaps: " + s.name, method: "GET", path: cmPath + "?" + s.query, want: []int{400}},
			apiCase{name: "selectors/watch configmaps: " + s.name, method: "GET", path: cmPath + "?" + watch + s.query, want: []int{400}},
			apiCase{name: "selectors/deletecollection configmaps: " + s.name, method: "DELETE", path: cmPath + "?" + s.query, want: []int{400}},
		)
	}
	add(
		apiCase{name: "selectors/list namespaces: unknown field", method: "GET", path: "/api/v1/namespaces?fieldSelector=" + url.QueryEscape("spec.bogus=x"), want: []int{400}},
		apiCase{name: "selectors/watch namespaces: bad label selector", method: "GET", path: "/api/v1/namespaces?" + watch + "labelSelector=" + url.QueryEscape("a in ((b))"), want: []int{400}},
		apiCase{name: "selectors/list services: unknown field", method: "GET", path: svcPath + "?fieldSelector=" + url.QueryEscape("spec.clusterIPs=x"), want: []int{400}},
		apiCase{name: "selectors/watch services: unknown field", method: "GET", path: svcPath + "?" + watch + "fieldSelector=" + url.QueryEscape("status.bogus=x"), want: []int{400}},
		apiCase{name: "selectors/list all configmaps: bad label selector", method: "GET", path: "/api/v1/configmaps?labelSelector=" + url.QueryEscape("a,,b"), want: []int{400}},
	)

	// Bad patches against ConfigMap target and Service web.
	add(
		apiCase{name: "patch/json patch with an unknown op", method: "PATCH", path: targetPath, contentType: ctJSONPat, body: []byte(`[{"op":"frobnicate","path":"/data/a","value":"x"}]`), want: []int{422}},
		apiCase{name: "patch/json patch op without a path", method: "PATCH", path: targetPath, contentType: ctJSONPat, body: []byte(`[{"op":"add","value":"x"}]`), want: []int{422}},
		apiCase{name: "patch/json patch that is an object", method: "PATCH", path: targetPath, contentType: ctJSONPat, body: []byte(`{"op":"add","path":"/data/b","value":"x"}`), want: []int{400}},
		apiCase{name: "patch/json patch malformed", method: "PATCH", path: targetPath, contentType: ctJSONPat, body: []byte(`[{"op":"add",`), want: []int{400}},
		apiCase{name: "patch/json patch with a failing test op", method: "PATCH", path: targetPath, contentType: ctJSONPat, body: []byte(`[{"op":"test","path":"/data/a","value":"not-1"},{"op":"replace","path":"/data/a","value":"2"}]`), want: []int{422}},
		apiCase{name: "patch/json patch removing a missing path", method: "PATCH", path: targetPath, contentType: ctJSONPat, body: []byte(`[{"op":"remove","path":"/data/nope"}]`), want: []int{422}},
		apiCase{name: "patch/json patch renaming the object", method: "PATCH", path: targetPath, contentType: ctJSONPat, body: []byte(`[{"op":"replace","path":"/metadata/name","value":"other"}]`), want: []int{400}},
		apiCase{name: "patch/json patch making data a number", method: "PATCH", path: targetPath, contentType: ctJSONPat, body: []byte(`[{"op":"replace","path":"/data","value":42}]`), want: []int{400, 422}},
		apiCase{name: "patch/merge patch that is an array", method: "PATCH", path: targetPath, contentType: ctMerge, body: []byte(`[1,2,3]`), want: []int{400, 422}},
		apiCase{name: "patch/merge patch that is a string", method: "PATCH", path: targetPath, contentType: ctMerge, body: []byte(`"data"`), want: []int{400, 422}},
		apiCase{name: "patch/merge patch that is null", method: "PATCH", path: targetPath, contentType: ctMerge, body: []byte(`null`), want: []int{400, 422}},
		apiCase{name: "patch/merge patch malformed", method: "PATCH", path: targetPath, contentType: ctMerge, body: []byte(`{"data":`), want: []int{400}},
		apiCase{name: "patch/merge patch renaming the object", method: "PATCH", path: targetPath, contentType: ctMerge, body: []byte(`{"metadata":{"name":"other"}}`), want: []int{400}},
		// kube-apiserver answers 500 to an unknown $patch directive
		// (strategicpatch's ErrBadPatchType is not mapped to a 4xx); the
		// contract here is a 4xx, as for every other malformed patch.
		apiCase{name: "patch/strategic merge patch with $patch: frobnicate", method: "PATCH", path: targetPath, contentType: ctSMP, body: []byte(`{"$patch":"frobnicate"}`), want: any4xx},
		apiCase{name: "patch/strategic merge patch with a nested unknown $patch", method: "PATCH", path: webPath, contentType: ctSMP, body: []byte(`{"spec":{"ports":[{"$patch":"frobnicate","port":80}]}}`), want: any4xx},
		// kube-apiserver answers 500 here too (mergepatch.ErrBadArgType is
		// not mapped to a 4xx either).
		apiCase{name: "patch/strategic merge patch with a bad $setElementOrder", method: "PATCH", path: webPath, contentType: ctSMP, body: []byte(`{"spec":{"$setElementOrder/ports":"notalist"}}`), want: any4xx},
		apiCase{name: "patch/strategic merge patch with a bad $retainKeys", method: "PATCH", path: webPath, contentType: ctSMP, body: []byte(`{"spec":{"$retainKeys":"notalist"}}`), want: []int{400}},
		apiCase{name: "patch/strategic merge patch that is an array", method: "PATCH", path: targetPath, contentType: ctSMP, body: []byte(`[{"data":{}}]`), want: []int{400}},
		apiCase{name: "patch/strategic merge patch malformed", method: "PATCH", path: targetPath, contentType: ctSMP, body: []byte(`{"data":{`), want: []int{400}},
		apiCase{name: "patch/unsupported patch content type", method: "PATCH", path: targetPath, contentType: ctJSON, body: []byte(`{"data":{"a":"2"}}`), want: []int{415}},
		apiCase{name: "patch/apply with invalid YAML", method: "PATCH", path: targetPath + "?fieldManager=bad", contentType: ctApply, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: target\n"), want: []int{400}},
		apiCase{name: "patch/apply that is a list", method: "PATCH", path: targetPath + "?fieldManager=bad", contentType: ctApply, body: []byte("- a\n- b\n"), want: []int{400}},
		apiCase{name: "patch/apply without kind", method: "PATCH", path: targetPath + "?fieldManager=bad", contentType: ctApply, body: []byte("metadata:\n  name: target\ndata:\n  a: \"2\"\n"), want: any4xx},
		apiCase{name: "patch/apply without fieldManager", method: "PATCH", path: targetPath, contentType: ctApply, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: target\ndata:\n  a: \"2\"\n"), want: []int{422}},
		apiCase{name: "patch/apply with a fieldManager over 128 chars", method: "PATCH", path: targetPath + "?fieldManager=" + strings.Repeat("m", 129), contentType: ctApply, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: target\ndata:\n  a: \"2\"\n"), want: []int{422}},
		apiCase{name: "patch/apply of the wrong kind", method: "PATCH", path: targetPath + "?fieldManager=bad", contentType: ctApply, body: []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: target\n"), want: any4xx},
		apiCase{name: "patch/apply with another name", method: "PATCH", path: targetPath + "?fieldManager=bad", contentType: ctApply, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n"), want: []int{400}},
		// kube-apiserver answers 500 to apply bodies that do not fit the
		// schema ("failed to create typed patch object", a plain error:
		// kubernetes/kubernetes#122480, #139253); the contract is a 4xx.
		apiCase{name: "patch/apply with data of the wrong type", method: "PATCH", path: targetPath + "?fieldManager=bad", contentType: ctApply, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: target\ndata: [1, 2]\n"), want: any4xx},
		apiCase{name: "patch/apply creating an invalid object", method: "PATCH", path: cmPath + "/fresh?fieldManager=bad", contentType: ctApply, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fresh\ndata:\n  \"bad key!\": x\n"), want: []int{422}},
		apiCase{name: "patch/apply with garbage CBOR", method: "PATCH", path: targetPath + "?fieldManager=bad", contentType: ctApplyCBR, body: []byte("\xff\xfe\xfd"), want: []int{400, 415}},
	)

	// Unknown fields with fieldValidation=Strict: 400 for a body, 422
	// (an Invalid "patch" field) for a patch.
	strict := "?fieldValidation=Strict"
	add(
		apiCase{name: "strict/unknown top-level field", method: "POST", path: cmPath + strict, body: []byte(cm(`"name":"s1"`, `,"bogus":1`)), want: []int{400}},
		apiCase{name: "strict/unknown metadata field", method: "POST", path: cmPath + strict, body: []byte(cm(`"name":"s2","bogus":1`, ``)), want: []int{400}},
		apiCase{name: "strict/duplicate field", method: "POST", path: cmPath + strict, body: []byte(cm(`"name":"s3","name":"s4"`, ``)), want: []int{400}},
		apiCase{name: "strict/unknown field in yaml", method: "POST", path: cmPath + strict, contentType: ctYAML, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s5\nbogus: 1\n"), want: []int{400}},
		apiCase{name: "strict/unknown service field", method: "POST", path: svcPath + strict, body: []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s6"},"spec":{"ports":[{"port":80,"bogus":1}]}}`), want: []int{400}},
		apiCase{name: "strict/unknown field on update", method: "PUT", path: targetPath + strict, body: []byte(cm(`"name":"target","resourceVersion":"`+fx.targetRV+`"`, `,"bogus":1`)), want: []int{400}},
		apiCase{name: "strict/unknown field in merge patch", method: "PATCH", path: targetPath + strict, contentType: ctMerge, body: []byte(`{"bogus":1}`), want: []int{422}},
		apiCase{name: "strict/unknown field in strategic merge patch", method: "PATCH", path: targetPath + strict, contentType: ctSMP, body: []byte(`{"data":{"a":"2"},"bogus":1}`), want: []int{422}},
		apiCase{name: "strict/unknown field in json patch", method: "PATCH", path: targetPath + strict, contentType: ctJSONPat, body: []byte(`[{"op":"add","path":"/bogus","value":1}]`), want: []int{422}},
		// kube-apiserver: 500, as "apply with data of the wrong type".
		apiCase{name: "strict/unknown field in apply", method: "PATCH", path: targetPath + strict + "&fieldManager=bad", contentType: ctApply, body: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: target\nbogus: 1\n"), want: any4xx},
		apiCase{name: "strict/unknown fieldValidation value", method: "POST", path: cmPath + "?fieldValidation=Bogus", body: []byte(cm(`"name":"s7"`, ``)), want: any4xx},
	)

	// Names and namespaces that differ between the body and the URL: 400.
	add(
		apiCase{name: "name/put with another name", method: "PUT", path: targetPath, body: []byte(cm(`"name":"other","resourceVersion":"`+fx.targetRV+`"`, `,"data":{"a":"2"}`)), want: []int{400}},
		apiCase{name: "name/put without a name", method: "PUT", path: targetPath, body: []byte(cm(`"resourceVersion":"`+fx.targetRV+`"`, `,"data":{"a":"2"}`)), want: []int{400}},
		apiCase{name: "name/put of target to another URL", method: "PUT", path: cmPath + "/victim", body: []byte(cm(`"name":"target","resourceVersion":"`+fx.targetRV+`"`, ``)), want: []int{400}},
		apiCase{name: "name/put with another namespace", method: "PUT", path: targetPath, body: []byte(cm(`"name":"target","namespace":"kube-system","resourceVersion":"`+fx.targetRV+`"`, ``)), want: []int{400}},
		apiCase{name: "name/post with another namespace", method: "POST", path: cmPath, body: []byte(cm(`"name":"n1","namespace":"kube-system"`, ``)), want: []int{400}},
		apiCase{name: "name/put of a service with another name", method: "PUT", path: webPath, body: []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"other","resourceVersion":"` + fx.webRV + `"},"spec":{"type":"NodePort","ports":[{"name":"http","port":80}]}}`), want: []int{400}},
		apiCase{name: "name/put with a stale resourceVersion", method: "PUT", path: targetPath, body: []byte(cm(`"name":"target","resourceVersion":"1"`, `,"data":{"a":"2"}`)), want: []int{409}},
	)

	// Creates with metadata.resourceVersion set. kube-apiserver answers 500
	// ("resourceVersion should not be set on objects to be created", a
	// plain storage error); the contract here is a 4xx.
	add(
		apiCase{name: "rv/create configmap", method: "POST", path: cmPath, body: []byte(cm(`"name":"rv1","resourceVersion":"12345"`, ``)), want: any4xx},
		apiCase{name: "rv/create namespace", method: "POST", path: "/api/v1/namespaces", body: []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"rv2","resourceVersion":"12345"}}`), want: any4xx},
		apiCase{name: "rv/create service", method: "POST", path: svcPath, body: []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"rv3","resourceVersion":"12345"},"spec":{"ports":[{"port":80}]}}`), want: any4xx},
	)

	// Allocation paths of Services: the write fails, no IPAddress or port
	// is left allocated.
	add(
		apiCase{name: "service/clusterIP already allocated", method: "POST", path: svcPath, body: []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"d1"},"spec":{"clusterIP":"10.0.0.1","ports":[{"port":80}]}}`), want: []int{422}},
		apiCase{name: "service/clusterIP out of range", method: "POST", path: svcPath, body: []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"d2"},"spec":{"clusterIP":"203.0.113.7","ports":[{"port":80}]}}`), want: []int{422}},
		apiCase{name: "service/malformed clusterIP", method: "POST", path: svcPath, body: []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"d3"},"spec":{"clusterIP":"10.0.0.999","ports":[{"port":80}]}}`), want: []int{422}},
		apiCase{name: "service/nodePort out of range", method: "POST", path: svcPath, body: []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"d4"},"spec":{"type":"NodePort","ports":[{"port":80,"nodePort":80}]}}`), want: []int{422}},
		apiCase{name: "service/same nodePort twice", method: "POST", path: svcPath, body: []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"d5"},"spec":{"type":"NodePort","ports":[{"name":"a","port":80,"nodePort":30080},{"name":"b","port":81,"nodePort":30080}]}}`), want: []int{422}},
		apiCase{name: "service/valid IP, invalid port", method: "POST", path: svcPath, body: []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"d6"},"spec":{"clusterIP":"10.0.0.77","ports":[{"port":70000}]}}`), want: []int{422}},
		apiCase{name: "service/bad ipFamilies", method: "POST", path: svcPath, body: []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"d7"},"spec":{"ipFamilies":["IPv5"],"ports":[{"port":80}]}}`), want: []int{422}},
	)

	// Requests a server refuses whatever the body.
	add(
		apiCase{name: "other/unsupported content type", method: "POST", path: cmPath, contentType: "text/plain", body: []byte(cm(`"name":"t1"`, ``)), want: []int{415}},
		apiCase{name: "other/post to an object URL", method: "POST", path: targetPath, body: []byte(cm(`"name":"target"`, ``)), want: []int{405}},
		apiCase{name: "other/create in a missing namespace", method: "POST", path: "/api/v1/namespaces/nope/configmaps", body: []byte(cm(`"name":"x"`, ``)), want: []int{404}},
		apiCase{name: "other/unknown resource", method: "POST", path: nsPath + "/bogus", body: []byte(cm(`"name":"x"`, ``)), want: []int{404}},
		apiCase{name: "other/unknown dryRun value", method: "POST", path: cmPath + "?dryRun=Maybe", body: []byte(cm(`"name":"x"`, ``)), want: []int{422}},
	)
	// Deletes with preconditions that do not hold: 409 Conflict. Last,
	// since a server that ignored them would delete the fixtures; the
	// namespace goes very last.
	add(
		apiCase{name: "delete/wrong uid precondition", method: "DELETE", path: targetPath, body: []byte(`{"apiVersion":"v1","kind":"DeleteOptions","preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}`), want: []int{409}},
		apiCase{name: "delete/wrong resourceVersion precondition", method: "DELETE", path: targetPath, body: []byte(`{"apiVersion":"v1","kind":"DeleteOptions","preconditions":{"resourceVersion":"1"}}`), want: []int{409}},
		apiCase{name: "delete/wrong uid precondition on a service", method: "DELETE", path: webPath, body: []byte(`{"apiVersion":"v1","kind":"DeleteOptions","preconditions":{"uid":"` + reverse(fx.targetUID) + `"}}`), want: []int{409}},
		apiCase{name: "delete/malformed options", method: "DELETE", path: targetPath, body: []byte(`{"apiVersion":"v1","kind":"DeleteOptions","preconditions":`), want: []int{400}},
		apiCase{name: "delete/options of the wrong kind", method: "DELETE", path: targetPath, body: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"target"}}`), want: []int{400}},
		apiCase{name: "delete/unknown propagation policy", method: "DELETE", path: targetPath + "?propagationPolicy=Sideways", want: []int{422}},
		apiCase{name: "delete/non-numeric grace period", method: "DELETE", path: targetPath + "?gracePeriodSeconds=abc", want: []int{400}},
		apiCase{name: "delete/dryRun with an unknown value", method: "DELETE", path: targetPath + "?dryRun=Maybe", want: []int{422}},
		apiCase{name: "delete/wrong uid precondition on a namespace", method: "DELETE", path: "/api/v1/namespaces/" + testNamespace, body: []byte(`{"apiVersion":"v1","kind":"DeleteOptions","preconditions":{"uid":"` + fx.targetUID + `"}}`), want: []int{409}},
	)
	return cases
}

// cm is a ConfigMap JSON document with metadata fields meta and further
// top-level members rest (starting with a comma).
func cm(meta, rest string) string {
	return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{` + meta + `}` + rest + `}`
}

// bigConfigMap is a ConfigMap JSON document of exactly size bytes.
func bigConfigMap(name string, size int) []byte {
	prefix := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"},"data":{"a":"`
	suffix := `"}}`
	return []byte(prefix + strings.Repeat("x", size-len(prefix)-len(suffix)) + suffix)
}

func nestedArrays(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

func nestedObjects(n int) string {
	return strings.Repeat(`{"a":`, n) + `"x"` + strings.Repeat("}", n)
}

// labels is a JSON label map of n valid labels plus one label "last" with
// value lastValue.
func labels(n int, lastValue string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, `"k%05d":"v",`, i)
	}
	b.WriteString(`"last":"` + lastValue + `"}`)
	return b.String()
}

// invalidLabels is a JSON label map of n labels whose keys are invalid.
func invalidLabels(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"bad key %d!":"v"`, i)
	}
	b.WriteString("}")
	return b.String()
}

// yamlAliasBomb is a "billion laughs" document: each level aliases the
// one before ten times.
func yamlAliasBomb() string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\n")
	b.WriteString(`a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	for i := 1; i < 10; i++ {
		p := fmt.Sprintf("*a%d", i-1)
		fmt.Fprintf(&b, "a%d: &a%d [%s,%s,%s,%s,%s,%s,%s,%s,%s,%s]\n", i, i, p, p, p, p, p, p, p, p, p, p)
	}
	b.WriteString("data:\n  x: *a9\n")
	return b.String()
}

// protoMarshaler is a gogo-generated protobuf message.
type protoMarshaler interface{ Marshal() ([]byte, error) }

func mustMarshal(m protoMarshaler) []byte {
	b, err := m.Marshal()
	if err != nil {
		panic(err)
	}
	return b
}

// protoEnvelope wraps raw in the Kubernetes protobuf envelope: the magic
// "k8s\x00" and a runtime.Unknown naming apiVersion and kind.
func protoEnvelope(apiVersion, kind string, raw []byte) []byte {
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw}
	return append([]byte("k8s\x00"), mustMarshal(&u)...)
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}
