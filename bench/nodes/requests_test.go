package nodes

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// apiCounts are counters of an API server's /metrics: the requests about
// Pods whose number per Pod says whether the load cost what it should. A
// simulated kubelet writes one status per Pod it starts; more are plays
// of a stage repeated on a stale copy of the Pod. The API server cuts off
// a watcher that falls behind its events (the watch cache's buffer), and
// a client whose watch ends at once lists again.
type apiCounts struct {
	statusPatches float64 // PATCH pods/status answered 200
	lists         float64 // LIST pods
	cutOff        float64 // Pod watchers the API server terminated
	etcdWrites    float64 // etcd creates and updates, every resource
}

// readAPICounts reads apiCounts from client's API server.
func readAPICounts(tb testing.TB, client kubernetes.Interface) apiCounts {
	raw, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	c, err := parseAPICounts(raw)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// parseAPICounts reads apiCounts from metrics in Prometheus's text format.
func parseAPICounts(raw []byte) (apiCounts, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return apiCounts{}, fmt.Errorf("parsing /metrics: %w", err)
	}
	pods := map[string]string{"group": "", "resource": "pods"}
	return apiCounts{
		statusPatches: sum(families["apiserver_request_total"], with(pods, "subresource", "status", "verb", "PATCH", "code", "200")),
		lists:         sum(families["apiserver_request_total"], with(pods, "subresource", "", "verb", "LIST")),
		cutOff:        sum(families["apiserver_terminated_watchers_total"], pods),
		etcdWrites: sum(families["etcd_requests_total"], map[string]string{"operation": "create"}) +
			sum(families["etcd_requests_total"], map[string]string{"operation": "update"}),
	}, nil
}

// minus is the counts from c's reading to d's.
func (d apiCounts) minus(c apiCounts) apiCounts {
	return apiCounts{
		statusPatches: d.statusPatches - c.statusPatches,
		lists:         d.lists - c.lists,
		cutOff:        d.cutOff - c.cutOff,
		etcdWrites:    d.etcdWrites - c.etcdWrites,
	}
}

// with is labels and the label pairs kv.
func with(labels map[string]string, kv ...string) map[string]string {
	m := maps.Clone(labels)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// sum is the total of family's counters whose labels include labels (a
// metric without one of them counts as having it empty).
func sum(family *dto.MetricFamily, labels map[string]string) float64 {
	var total float64
	for _, m := range family.GetMetric() {
		has := map[string]string{}
		for _, l := range m.GetLabel() {
			has[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			if has[k] != v {
				match = false
				break
			}
		}
		if match {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

func TestParseAPICounts(t *testing.T) {
	const metrics = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 7200
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 400
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1"} 414
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 6
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 119
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 6000
# HELP apiserver_terminated_watchers_total [STABLE] Counter of watchers closed due to unresponsiveness broken by resource type.
# TYPE apiserver_terminated_watchers_total counter
apiserver_terminated_watchers_total{group="",resource="pods"} 119
apiserver_terminated_watchers_total{group="coordination.k8s.io",resource="leases"} 3
# HELP etcd_requests_total [ALPHA] Etcd request counts for each operation and object type.
# TYPE etcd_requests_total counter
etcd_requests_total{group="",operation="create",type="pods"} 6000
etcd_requests_total{group="",operation="update",type="pods"} 13200
etcd_requests_total{group="",operation="get",type="pods"} 50
etcd_requests_total{group="coordination.k8s.io",operation="update",type="leases"} 800
`
	tests := []struct {
		name string
		got  func(apiCounts) float64
		want float64
	}{
		{"Pod status patches answered 200", func(c apiCounts) float64 { return c.statusPatches }, 7200},
		{"Pod lists of every scope", func(c apiCounts) float64 { return c.lists }, 420},
		{"Pod watchers cut off", func(c apiCounts) float64 { return c.cutOff }, 119},
		{"etcd creates and updates", func(c apiCounts) float64 { return c.etcdWrites }, 20000},
	}
	c, err := parseAPICounts([]byte(metrics))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		if got := tt.got(c); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	if d := c.minus(apiCounts{statusPatches: 200, lists: 20, cutOff: 19, etcdWrites: 1000}); d != (apiCounts{7000, 400, 100, 19000}) {
		t.Errorf("minus: %+v", d)
	}
	if _, err := parseAPICounts([]byte("apiserver_request_total{code=\"200\" 1\n")); err == nil {
		t.Error("metrics that are not Prometheus's text format: no error")
	}
}
