package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// This file checks what `kubectl get`, short names, `get all` and
// `api-resources` print against the reference captures.

// getFixtures creates in ns the objects of the reference captures: the
// services web, np and hl with `kubectl create service`, and a configmap,
// secret, serviceaccount, endpoints, endpointslice, event and lease from a
// manifest. It returns the ClusterIPs of web and np and np's nodePort.
func getFixtures(t *testing.T, ns string) (webIP, npIP, nodePort string) {
	t.Helper()
	kubectl(t, "create", "service", "clusterip", "web", "-n", ns, "--tcp=80:8080")
	kubectl(t, "create", "service", "nodeport", "np", "-n", ns, "--tcp=80:8080")
	kubectl(t, "create", "service", "clusterip", "hl", "-n", ns, "--clusterip=None")
	manifest := strings.ReplaceAll(`apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {a: b}
---
apiVersion: v1
kind: Secret
metadata: {name: sec}
stringData: {a: b}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: bot}
---
apiVersion: v1
kind: Endpoints
metadata: {name: manual}
subsets:
- addresses: [{ip: 198.51.100.20}]
  ports: [{port: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: manual-slice}
addressType: IPv4
endpoints:
- addresses: [198.51.100.10]
ports:
- port: 16443
---
apiVersion: v1
kind: Event
metadata: {name: e1}
involvedObject: {apiVersion: v1, kind: Service, name: web, namespace: NS}
reason: Probe
message: hello
type: Normal
count: 1
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: l1}
spec: {holderIdentity: me}
`, "NS", ns)
	kubectlStdin(t, manifest, "create", "-n", ns, "-f", "-")
	webIP = kubectl(t, "get", "service", "web", "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
	npIP = kubectl(t, "get", "service", "np", "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
	nodePort = kubectl(t, "get", "service", "np", "-n", ns, "-o", "jsonpath={.spec.ports[0].nodePort}")
	return webIP, npIP, nodePort
}

// TestGetColumns compares the headers and cells of `kubectl get`, plain,
// -o wide and -A -o wide, with the reference for every resource served.
func TestGetColumns(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	webIP, npIP, nodePort := getFixtures(t, ns)

	cases := []struct {
		resource   string
		table      string              // testdata/table-<table>.json
		names      []string            // names to get, for cluster-scoped resources
		rows       []map[string]string // -o wide cells of the rows that must be there
		warning    string              // stderr line kubectl must print
		namespaced bool
	}{
		{resource: "namespaces", table: "namespaces", names: []string{ns},
			rows: []map[string]string{{"NAME": lit(ns), "STATUS": "Active", "AGE": age}}},
		{resource: "services", table: "services", namespaced: true, rows: []map[string]string{
			{"NAME": "hl", "TYPE": "ClusterIP", "CLUSTER-IP": "None", "EXTERNAL-IP": "<none>", "PORT(S)": "<none>", "AGE": age, "SELECTOR": "app=hl"},
			{"NAME": "np", "TYPE": "NodePort", "CLUSTER-IP": lit(npIP), "EXTERNAL-IP": "<none>", "PORT(S)": lit("80:" + nodePort + "/TCP"), "AGE": age, "SELECTOR": "app=np"},
			{"NAME": "web", "TYPE": "ClusterIP", "CLUSTER-IP": lit(webIP), "EXTERNAL-IP": "<none>", "PORT(S)": lit("80/TCP"), "AGE": age, "SELECTOR": "app=web"},
		}},
		{resource: "endpoints", table: "endpoints", namespaced: true,
			warning: "Warning: v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice",
			rows:    []map[string]string{{"NAME": "manual", "ENDPOINTS": lit("198.51.100.20:8080"), "AGE": age}}},
		{resource: "endpointslices", table: "endpointslices", namespaced: true, rows: []map[string]string{
			{"NAME": "manual-slice", "ADDRESSTYPE": "IPv4", "PORTS": "16443", "ENDPOINTS": lit("198.51.100.10"), "AGE": age}}},
		{resource: "configmaps", table: "configmaps", namespaced: true,
			rows: []map[string]string{{"NAME": "cfg", "DATA": "1", "AGE": age}}},
		{resource: "secrets", table: "secrets", namespaced: true,
			rows: []map[string]string{{"NAME": "sec", "TYPE": "Opaque", "DATA": "1", "AGE": age}}},
		{resource: "serviceaccounts", table: "serviceaccounts", namespaced: true,
			rows: []map[string]string{{"NAME": "bot", "AGE": age}}},
		{resource: "events", table: "events", namespaced: true, rows: []map[string]string{{
			"LAST SEEN": "<unknown>", "TYPE": "Normal", "REASON": "Probe", "OBJECT": lit("service/web"), "SUBOBJECT": "",
			"SOURCE": "", "MESSAGE": "hello", "FIRST SEEN": "<unknown>", "COUNT": "1", "NAME": "e1"}}},
		{resource: "leases", table: "leases", namespaced: true,
			rows: []map[string]string{{"NAME": "l1", "HOLDER": "me", "AGE": age}}},
		{resource: "servicecidrs", table: "servicecidrs", names: []string{"kubernetes"},
			rows: []map[string]string{{"NAME": "kubernetes", "CIDRS": lit(serviceCIDR), "AGE": age}}},
		{resource: "ipaddresses", table: "ipaddresses", names: []string{webIP, npIP}, rows: []map[string]string{
			{"NAME": lit(webIP), "PARENTREF": lit("services/" + ns + "/web")},
			{"NAME": lit(npIP), "PARENTREF": lit("services/" + ns + "/np")},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.resource, func(t *testing.T) {
			t.Parallel()
			scope := append([]string{"-n", ns}, tc.names...)
			if !tc.namespaced {
				scope = tc.names
			}
			for _, wide := range []bool{false, true} {
				args := append([]string{"get", tc.resource}, scope...)
				if wide {
					args = append(args, "-o", "wide")
				}
				r := runKubectl(t, "", args...)
				if r.err != nil {
					t.Errorf("%s: %v\n%s", r.cmdline, r.err, r.stderr)
					continue
				}
				if tc.warning != "" && !strings.Contains(r.stderr, tc.warning) {
					t.Errorf("%s: stderr %q lacks %q", r.cmdline, r.stderr, tc.warning)
				}
				tb := parseTable(t, r.stdout)
				if want := refHeader(t, tc.table, wide); !reflect.DeepEqual(tb.header, want) {
					t.Errorf("%s: header %q, want %q", r.cmdline, tb.header, want)
					continue
				}
				for _, row := range tc.rows {
					requireRow(t, r.cmdline, tb, row)
				}
			}

			// -A -o wide: the header exactly as the reference printed it.
			r := runKubectl(t, "", "get", tc.resource, "-A", "-o", "wide")
			if r.err != nil {
				t.Fatalf("%s: %v\n%s", r.cmdline, r.err, r.stderr)
			}
			ref := refOutput(t, "kubectl get "+tc.resource+" -A -o wide")
			if tc.warning != "" {
				ref = strings.TrimPrefix(ref, tc.warning+"\n")
			}
			if strings.TrimSpace(r.stdout) == "" {
				t.Fatalf("%s: no output, stderr %q", r.cmdline, r.stderr)
			}
			tb := parseTable(t, r.stdout)
			if want := parseTable(t, ref).header; !reflect.DeepEqual(tb.header, want) {
				t.Fatalf("%s: header %q, want %q (reference)", r.cmdline, tb.header, want)
			}
			for _, row := range tc.rows {
				if tc.namespaced {
					row = withColumn(row, "NAMESPACE", lit(ns))
				}
				requireRow(t, r.cmdline, tb, row)
			}
		})
	}
}

// withColumn returns a copy of row with one more column.
func withColumn(row map[string]string, name, pat string) map[string]string {
	out := map[string]string{name: pat}
	for k, v := range row {
		out[k] = v
	}
	return out
}

// TestGetShortNames checks that ns, svc, ep, cm, sa and ev list the same
// objects with the same columns as the full resource names.
func TestGetShortNames(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	getFixtures(t, ns)

	for short, long := range map[string]string{
		"ns": "namespaces", "svc": "services", "ep": "endpoints",
		"cm": "configmaps", "sa": "serviceaccounts", "ev": "events",
	} {
		t.Run(short, func(t *testing.T) {
			t.Parallel()
			scope := []string{"-n", ns}
			if short == "ns" {
				scope = []string{ns}
			}
			got := parseTable(t, kubectl(t, append([]string{"get", short}, scope...)...))
			want := parseTable(t, kubectl(t, append([]string{"get", long}, scope...)...))
			if !reflect.DeepEqual(got.header, want.header) {
				t.Errorf("kubectl get %s: header %q, want %q as for %s", short, got.header, want.header, long)
			}
			key := "NAME"
			if short == "ev" {
				key = "OBJECT" // events show NAME only with -o wide
			}
			if g, w := got.column(key), want.column(key); len(g) == 0 || !reflect.DeepEqual(g, w) {
				t.Errorf("kubectl get %s: %s column %q, want %q as for %s", short, key, g, w, long)
			}
		})
	}
}

// TestGetAll checks that `kubectl get all` lists services (the "all"
// category). kubectl prefixes names with service/ only when the category
// holds more than one resource, so both spellings pass.
func TestGetAll(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	kubectl(t, "create", "service", "clusterip", "web", "-n", ns, "--tcp=80:8080")
	kubectl(t, "create", "service", "clusterip", "hl", "-n", ns, "--clusterip=None")

	out := kubectl(t, "get", "all", "-n", ns)
	tb := parseTable(t, out)
	if want := []string{"NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"}; !reflect.DeepEqual(tb.header, want) {
		t.Fatalf("kubectl get all -n %s: header %q, want %q\n%s", ns, tb.header, want, out)
	}
	got := strings.Join(tb.column("NAME"), " ")
	if !regexp.MustCompile(`^(service/)?hl (service/)?web$`).MatchString(got) {
		t.Errorf("kubectl get all -n %s: names %q, want the services hl and web", ns, got)
	}
}

// TestAPIResources compares kubectl api-resources with kube-apiserver
// 1.37's (testdata/api-resources-1.37.txt), line by line: every resource it serves, with its short names,
// version, scope and kind, and none it does not (in its groups: the CRD
// tests add groups of their own meanwhile).
func TestAPIResources(t *testing.T) {
	t.Parallel()
	ref := parseTable(t, readTestdata(t, "api-resources-1.37.txt"))
	got := parseTable(t, kubectl(t, "api-resources"))
	if !reflect.DeepEqual(got.header, ref.header) {
		t.Fatalf("kubectl api-resources: header %q, want %q", got.header, ref.header)
	}
	byKey := func(tb table) map[string][]string {
		m := map[string][]string{}
		for _, r := range tb.rows {
			m[r[0]+" "+r[2]] = r // NAME APIVERSION
		}
		return m
	}
	gotRows, refRows := byKey(got), byKey(ref)
	refVersions := map[string]bool{}
	for key, want := range refRows {
		refVersions[want[2]] = true
		if g := gotRows[key]; !reflect.DeepEqual(g, want) {
			t.Errorf("kubectl api-resources: %s: got %q, want %q", key, g, want)
		}
	}
	for key, g := range gotRows {
		if _, ok := refRows[key]; !ok && refVersions[g[2]] {
			t.Errorf("kubectl api-resources: %s is not served by kube-apiserver: %q", key, g)
		}
	}
}

// TestTableColumnDefinitions compares the server's Table column
// definitions (name, type, format, description, priority) with the
// reference tables.
func TestTableColumnDefinitions(t *testing.T) {
	t.Parallel()
	paths := map[string]string{
		"namespaces":      "/api/v1/namespaces",
		"services":        "/api/v1/namespaces/default/services",
		"endpoints":       "/api/v1/namespaces/default/endpoints",
		"configmaps":      "/api/v1/namespaces/default/configmaps",
		"secrets":         "/api/v1/namespaces/default/secrets",
		"serviceaccounts": "/api/v1/namespaces/default/serviceaccounts",
		"events":          "/api/v1/namespaces/default/events",
		"leases":          "/apis/coordination.k8s.io/v1/namespaces/default/leases",
		"endpointslices":  "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
		"servicecidrs":    "/apis/networking.k8s.io/v1/servicecidrs",
		"ipaddresses":     "/apis/networking.k8s.io/v1/ipaddresses",
	}
	for resource, path := range paths {
		t.Run(resource, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequest(http.MethodGet, suite.url+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
			resp, err := suite.admin.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s as Table: HTTP %d\n%s", path, resp.StatusCode, body)
			}
			var tbl struct {
				Kind              string   `json:"kind"`
				ColumnDefinitions []column `json:"columnDefinitions"`
			}
			if err := json.Unmarshal(body, &tbl); err != nil || tbl.Kind != "Table" {
				t.Fatalf("GET %s as Table: kind %q, err %v\n%.300s", path, tbl.Kind, err, body)
			}
			want := refColumns(t, resource)
			if len(tbl.ColumnDefinitions) != len(want) {
				t.Fatalf("GET %s as Table: %d columns, want %d", path, len(tbl.ColumnDefinitions), len(want))
			}
			for i, c := range tbl.ColumnDefinitions {
				// Descriptions are the served version's field docs, which
				// 1.37 rewrote (lower-case field names); the reference
				// tables are 1.36's. Both come from upstream's types.
				c.Description, want[i].Description = "", ""
				if c != want[i] {
					t.Errorf("GET %s as Table: column %d\n  got  %+v\n  want %+v", path, i, c, want[i])
				}
			}
		})
	}
}

// TestComponentStatuses: the deprecated componentstatuses report etcd
// through the server's own client, as kube-apiserver's do. (The
// controller manager and the scheduler are probed on their default ports
// on this host, which other tests may hold; test/server checks them in
// `kubeboot server`.)
func TestComponentStatuses(t *testing.T) {
	t.Parallel()
	got := kubectl(t, "get", "componentstatus", "etcd-0", "-o", "jsonpath={.conditions[0].type}={.conditions[0].status} {.conditions[0].message}")
	if want := "Healthy=True ok"; got != want {
		t.Errorf("kubectl get componentstatus etcd-0: %q, want %q", got, want)
	}
}
