package e2e

import (
	"encoding/json"
	"net"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// This file checks Service IP and port allocation: where they come from,
// what taken or out-of-range requests get, immutability, and release.

// serviceJSON is a minimal Service manifest; spec is the JSON of its spec.
func serviceJSON(name, spec string) string {
	return `{"apiVersion":"v1","kind":"Service","metadata":{"name":"` + name + `"},"spec":` + spec + `}`
}

// TestServiceAllocation creates ClusterIP, NodePort and headless services
// and checks what was allocated and defaulted.
func TestServiceAllocation(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	kubectl(t, "create", "service", "clusterip", "web", "-n", ns, "--tcp=80:8080")
	kubectl(t, "create", "service", "nodeport", "np", "-n", ns, "--tcp=80:8080")
	kubectl(t, "create", "service", "clusterip", "hl", "-n", ns, "--clusterip=None")

	_, cidr, _ := net.ParseCIDR(serviceCIDR)
	for _, name := range []string{"web", "np"} {
		got := kubectl(t, "get", "service", name, "-n", ns, "-o", "jsonpath={.spec.clusterIP} {.spec.clusterIPs}")
		ip, ips, _ := strings.Cut(got, " ")
		if parsed := net.ParseIP(ip); parsed == nil || !cidr.Contains(parsed) {
			t.Errorf("service %s: clusterIP %q not in %s", name, ip, serviceCIDR)
		}
		if want := `["` + ip + `"]`; ips != want {
			t.Errorf("service %s: clusterIPs %s, want %s", name, ips, want)
		}
		ref := kubectl(t, "get", "ipaddress", ip, "-o", "jsonpath={.spec.parentRef.group}/{.spec.parentRef.resource}/{.spec.parentRef.namespace}/{.spec.parentRef.name}")
		if want := "/services/" + ns + "/" + name; ref != want {
			t.Errorf("IPAddress %s: parentRef %q, want %q", ip, ref, want)
		}
	}

	port, err := strconv.Atoi(kubectl(t, "get", "service", "np", "-n", ns, "-o", "jsonpath={.spec.ports[0].nodePort}"))
	if err != nil || port < 30000 || port > 32767 {
		t.Errorf("service np: nodePort %d (%v), want within 30000-32767", port, err)
	}
	if ip := kubectl(t, "get", "service", "hl", "-n", ns, "-o", "jsonpath={.spec.clusterIP}/{.spec.clusterIPs}"); ip != `None/["None"]` {
		t.Errorf("headless service: clusterIP/clusterIPs %q, want None/[\"None\"]", ip)
	}
	tb := parseTable(t, kubectl(t, "get", "service", "hl", "-n", ns))
	if got := tb.column("CLUSTER-IP"); !reflect.DeepEqual(got, []string{"None"}) {
		t.Errorf("kubectl get service hl: CLUSTER-IP %q, want None", got)
	}

	// The defaulted NodePort service equals the reference one but for the
	// allocated values.
	var got, want map[string]any
	if err := json.Unmarshal([]byte(kubectl(t, "get", "service", "np", "-n", ns, "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(readTestdata(t, "defaulted-service-nodeport.json")), &want); err != nil {
		t.Fatal(err)
	}
	gotSpec, wantSpec := got["spec"].(map[string]any), want["spec"].(map[string]any)
	wantSpec["clusterIP"], wantSpec["clusterIPs"] = gotSpec["clusterIP"], gotSpec["clusterIPs"]
	wantSpec["ports"].([]any)[0].(map[string]any)["nodePort"] = gotSpec["ports"].([]any)[0].(map[string]any)["nodePort"]
	for _, part := range []string{"spec", "status"} {
		if !reflect.DeepEqual(got[part], want[part]) {
			g, _ := json.Marshal(got[part])
			w, _ := json.Marshal(want[part])
			t.Errorf("defaulted NodePort service %s:\n  got  %s\n  want %s", part, g, w)
		}
	}
}

// TestServiceAllocationErrors asks for a taken ClusterIP, an out-of-range
// one, a taken nodePort and an out-of-range one, and compares the kubectl
// messages and the HTTP Status with the reference.
func TestServiceAllocationErrors(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	kubectl(t, "create", "service", "clusterip", "web", "-n", ns, "--tcp=80:8080")
	kubectl(t, "create", "service", "nodeport", "np", "-n", ns, "--tcp=80:8080")
	ip := kubectl(t, "get", "service", "web", "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
	nodePort := kubectl(t, "get", "service", "np", "-n", ns, "-o", "jsonpath={.spec.ports[0].nodePort}")

	for _, tc := range []struct {
		title, name, spec string
		replace           []string // reference values to this run's
	}{
		{"duplicate clusterIP", "d1", `{"clusterIP":"` + ip + `","ports":[{"port":80}]}`, []string{"10.96.202.200", ip}},
		{"clusterIP out of range", "d2", `{"clusterIP":"203.0.113.7","ports":[{"port":80}]}`, nil},
		{"duplicate nodePort", "d3", `{"type":"NodePort","ports":[{"port":80,"nodePort":` + nodePort + `}]}`, []string{"31715", nodePort}},
		{"nodePort out of range", "d4", `{"type":"NodePort","ports":[{"port":80,"nodePort":80}]}`, nil},
	} {
		t.Run(tc.title, func(t *testing.T) {
			want := refStatus(t, tc.title, tc.replace...)
			manifest := serviceJSON(tc.name, tc.spec)
			if got := kubectlFails(t, manifest, "create", "-n", ns, "-f", "-"); got != kubectlInvalid(want) {
				t.Errorf("kubectl create -f (%s):\n  got  %q\n  want %q", manifest, got, kubectlInvalid(want))
			}
			code, body := apiRequest(t, "POST", "/api/v1/namespaces/"+ns+"/services", []byte(manifest))
			requireStatus(t, "POST "+manifest, code, body, want)
		})
	}
}

// TestServiceClusterIPImmutable changes an allocated ClusterIP.
func TestServiceClusterIPImmutable(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	kubectl(t, "create", "service", "clusterip", "web", "-n", ns, "--tcp=80:8080")
	ip := kubectl(t, "get", "service", "web", "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
	newIP := "10.96.0.99"
	if ip == newIP {
		newIP = "10.96.0.98"
	}
	want := refStatus(t, "update clusterIP (immutable)", "10.96.0.99", newIP)
	got := kubectlFails(t, "", "patch", "service", "web", "-n", ns, "--type=merge",
		"-p", `{"spec":{"clusterIP":"`+newIP+`","clusterIPs":["`+newIP+`"]}}`)
	if got != kubectlInvalid(want) {
		t.Errorf("kubectl patch clusterIP:\n  got  %q\n  want %q", got, kubectlInvalid(want))
	}
	if after := kubectl(t, "get", "service", "web", "-n", ns, "-o", "jsonpath={.spec.clusterIP}"); after != ip {
		t.Errorf("clusterIP %s after the refused change, want %s", after, ip)
	}
}

// TestServiceRelease deletes services and expects the IPAddress to go and
// the ClusterIP and nodePort to be allocatable again.
func TestServiceRelease(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	kubectl(t, "create", "service", "nodeport", "first", "-n", ns, "--tcp=80:8080")
	ip := kubectl(t, "get", "service", "first", "-n", ns, "-o", "jsonpath={.spec.clusterIP}")
	nodePort := kubectl(t, "get", "service", "first", "-n", ns, "-o", "jsonpath={.spec.ports[0].nodePort}")
	if tb := parseTable(t, kubectl(t, "get", "ipaddresses", ip)); !reflect.DeepEqual(tb.column("PARENTREF"), []string{"services/" + ns + "/first"}) {
		t.Fatalf("kubectl get ipaddresses %s: PARENTREF %q", ip, tb.column("PARENTREF"))
	}

	kubectl(t, "delete", "service", "first", "-n", ns)
	eventually(t, 10*time.Second, "IPAddress "+ip+" deleted with its service", func() (bool, string) {
		r := runKubectl(t, "", "get", "ipaddresses", ip)
		return r.err != nil && strings.Contains(r.stderr, `ipaddresses.networking.k8s.io "`+ip+`" not found`), r.stdout + r.stderr
	})
	if out := kubectl(t, "get", "ipaddresses"); strings.Contains(out, "services/"+ns+"/first") {
		t.Errorf("kubectl get ipaddresses still lists the deleted service:\n%s", out)
	}

	spec := `{"type":"NodePort","clusterIP":"` + ip + `","ports":[{"port":80,"nodePort":` + nodePort + `}]}`
	kubectlStdin(t, serviceJSON("second", spec), "create", "-n", ns, "-f", "-")
	got := kubectl(t, "get", "service", "second", "-n", ns, "-o", "jsonpath={.spec.clusterIP}/{.spec.ports[0].nodePort}")
	if got != ip+"/"+nodePort {
		t.Errorf("reusing the released ClusterIP and nodePort: got %s, want %s/%s", got, ip, nodePort)
	}
}

// TestBootstrapObjects checks the objects a kube-apiserver keeps for
// itself: the default ServiceCIDR, the kubernetes service on the first
// address of the range with its IPAddress, Endpoints and EndpointSlice on
// the serving port, the identity lease and the token tracking configmap.
func TestBootstrapObjects(t *testing.T) {
	t.Parallel()
	checks := []struct {
		args []string
		row  map[string]string
	}{
		{[]string{"get", "servicecidrs", "kubernetes"},
			map[string]string{"NAME": "kubernetes", "CIDRS": lit(serviceCIDR), "AGE": age}},
		{[]string{"get", "services", "kubernetes", "-n", "default", "-o", "wide"},
			map[string]string{"NAME": "kubernetes", "TYPE": "ClusterIP", "CLUSTER-IP": lit("10.96.0.1"), "EXTERNAL-IP": "<none>", "PORT(S)": lit("443/TCP"), "AGE": age, "SELECTOR": "<none>"}},
		{[]string{"get", "ipaddresses", "10.96.0.1"},
			map[string]string{"NAME": lit("10.96.0.1"), "PARENTREF": lit("services/default/kubernetes")}},
		{[]string{"get", "endpoints", "kubernetes", "-n", "default"},
			map[string]string{"NAME": "kubernetes", "ENDPOINTS": `[0-9.]+:` + suite.port, "AGE": age}},
		{[]string{"get", "endpointslices", "kubernetes", "-n", "default"},
			map[string]string{"NAME": "kubernetes", "ADDRESSTYPE": "IPv4", "PORTS": suite.port, "ENDPOINTS": `[0-9.]+`, "AGE": age}},
		{[]string{"get", "leases", "-n", "kube-system", "-l", "apiserver.kubernetes.io/identity=kube-apiserver"},
			map[string]string{"NAME": `apiserver-[a-z0-9]+`, "HOLDER": `apiserver-[a-z0-9]+_[0-9a-f-]{36}`, "AGE": age}},
		{[]string{"get", "configmaps", "-n", "kube-system", "kube-apiserver-legacy-service-account-token-tracking"},
			map[string]string{"NAME": "kube-apiserver-legacy-service-account-token-tracking", "DATA": "1", "AGE": age}},
	}
	for _, c := range checks {
		r := runKubectl(t, "", c.args...)
		if r.err != nil {
			t.Errorf("kubectl %s: %v: %s", strings.Join(c.args, " "), r.err, strings.TrimSpace(r.stderr))
			continue
		}
		requireRow(t, "kubectl "+strings.Join(c.args, " "), parseTable(t, r.stdout), c.row)
	}
}
