package helmcontroller_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/components/helmcontroller"
	"github.com/kubeboot/kubeboot/kubeboottest"
)

// Templates a chart may have beside its ConfigMap.
const (
	// broken does not render.
	broken = "{{ required \"broken needs a value\" .Values.nothing }}\n"
	// waiting is a pre-install hook, a Job that never runs (no nodes):
	// the install waits for it until its timeout.
	waiting = `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-wait
  annotations:
    helm.sh/hook: pre-install
    helm.sh/hook-delete-policy: hook-failed,hook-succeeded
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: wait, image: wait}]
`
)

// chart is a chart archive: name at version, a ConfigMap named for the
// release holding .Values.greeting, and extra, a template (or none).
func chart(t *testing.T, name, version string, extra string) []byte {
	t.Helper()
	files := map[string]string{
		name + "/Chart.yaml":  fmt.Sprintf("apiVersion: v2\nname: %s\nversion: %s\n", name, version),
		name + "/values.yaml": "greeting: hello\n",
		name + "/templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  greeting: {{ .Values.greeting | quote }}
  chart: {{ .Chart.Version | quote }}
{{- with .Values.extra }}
  extra: {{ . | quote }}
{{- end }}
`,
	}
	if extra != "" {
		files[name+"/templates/extra.yaml"] = extra
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for path, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: path, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// repository serves a chart repository: index.yaml and each chart's
// archive, name-version.tgz.
func repository(t *testing.T, charts map[string][]byte) *httptest.Server {
	t.Helper()
	index := "apiVersion: v1\nentries:\n"
	byName := map[string][]string{}
	for file := range charts {
		name, version, _ := strings.Cut(strings.TrimSuffix(file, ".tgz"), "-")
		byName[name] = append(byName[name], version)
	}
	for name, versions := range byName {
		index += fmt.Sprintf("  %s:\n", name)
		for _, v := range versions {
			index += fmt.Sprintf("  - apiVersion: v2\n    name: %s\n    version: %s\n    urls: [%s-%s.tgz]\n", name, v, name, v)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimPrefix(r.URL.Path, "/")
		if path == "index.yaml" {
			w.Write([]byte(index))
			return
		}
		if b, ok := charts[path]; ok {
			w.Write(b)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

var helmCharts = helmcontroller.GroupVersion.WithResource("helmcharts")

// TestHelmCharts: HelmCharts are installed, upgraded when their values
// change (a HelmChartConfig's and set included), and uninstalled when
// deleted; from chartContent and from a repository; a chart that does not
// render, one the repository lacks and an unreachable repository each
// fail with a Warning event and a Failed condition, nothing applied, and
// the server serving.
func TestHelmCharts(t *testing.T) {
	s := kubeboottest.Start(t, kubeboottest.Options{Configure: func(c *controlplane.Config) {
		// Leading through a lease, as in a server.
		le := componentbaseconfig.LeaderElectionConfiguration{LeaderElect: true, ResourceLock: "leases",
			LeaseDuration: metav1.Duration{Duration: 15 * time.Second}, RenewDeadline: metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod: metav1.Duration{Duration: 500 * time.Millisecond}}
		c.Components = append(c.Components, helmcontroller.New(le))
	}})
	client := kubernetes.NewForConfigOrDie(s.Config)
	dyn := dynamic.NewForConfigOrDie(s.Config)
	ctx := context.Background()

	// The kinds are served once the controller has installed them.
	waitFor(t, "the HelmChart kind served", func(ctx context.Context) (bool, string) {
		_, err := dyn.Resource(helmCharts).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})

	// Without a HelmChart the controller waits: it takes no lease (and
	// runs no informer) until the first one.
	time.Sleep(time.Second)
	if _, err := client.CoordinationV1().Leases("kube-system").Get(ctx, helmcontroller.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the controller's lease before any HelmChart: %v, want NotFound", err)
	}

	apply := func(obj string) {
		t.Helper()
		u := &unstructured.Unstructured{}
		if err := yamlToUnstructured(obj, u); err != nil {
			t.Fatal(err)
		}
		res := helmCharts
		if u.GetKind() == "HelmChartConfig" {
			res = helmcontroller.GroupVersion.WithResource("helmchartconfigs")
		}
		data, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(res).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), "application/apply-patch+yaml", data,
			metav1.PatchOptions{FieldManager: "test", Force: ptr.To(true)}); err != nil {
			t.Fatal(err)
		}
	}
	settings := func(ns, name string) (map[string]string, error) {
		cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, name+"-settings", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return cm.Data, nil
	}
	waitGreeting := func(ns, release, want string) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%s/%s-settings greeting %q", ns, release, want), func(ctx context.Context) (bool, string) {
			data, err := settings(ns, release)
			if err != nil {
				return false, err.Error()
			}
			return data["greeting"] == want, fmt.Sprint(data)
		})
	}

	content := base64.StdEncoding.EncodeToString(chart(t, "greeter", "0.1.0", ""))
	// greeter is the HelmChart greeter of content, installed into the
	// namespace greeting, with greeting as its valuesContent and more
	// lines of its spec.
	greeter := func(greeting, more string) string {
		return fmt.Sprintf(`apiVersion: helm.cattle.io/v1
kind: HelmChart
metadata: {name: greeter, namespace: kube-system}
spec:
  chartContent: %s
  targetNamespace: greeting
  createNamespace: true
  valuesContent: |
    greeting: %s
%s`, content, greeting, more)
	}
	t.Run("chartContent: installed into a namespace it creates", func(t *testing.T) {
		apply(greeter("hi", ""))
		waitFor(t, "the controller's lease, once a HelmChart exists", func(ctx context.Context) (bool, string) {
			_, err := client.CoordinationV1().Leases("kube-system").Get(ctx, helmcontroller.Name, metav1.GetOptions{})
			return err == nil, fmt.Sprint(err)
		})
		waitGreeting("greeting", "greeter", "hi")
		waitCondition(t, dyn, "kube-system", "greeter", "Deployed", "True")
		if _, err := client.CoreV1().Secrets("greeting").Get(ctx, "sh.helm.release.v1.greeter.v1", metav1.GetOptions{}); err != nil {
			t.Errorf("Helm's record of revision 1: %v", err)
		}
		waitEvent(t, client, "kube-system", "greeter", "Installed")
	})

	t.Run("values changed: upgraded; a HelmChartConfig's and set's over them", func(t *testing.T) {
		apply(greeter("hello again", ""))
		waitGreeting("greeting", "greeter", "hello again")
		if _, err := client.CoreV1().Secrets("greeting").Get(ctx, "sh.helm.release.v1.greeter.v2", metav1.GetOptions{}); err != nil {
			t.Errorf("Helm's record of revision 2: %v", err)
		}
		apply(`apiVersion: helm.cattle.io/v1
kind: HelmChartConfig
metadata: {name: greeter, namespace: kube-system}
spec:
  valuesContent: |
    greeting: configured
    extra: from the config
`)
		waitGreeting("greeting", "greeter", "configured")
		apply(greeter("hello again", "  set:\n    greeting: \"set\"\n"))
		waitGreeting("greeting", "greeter", "set")
		data, err := settings("greeting", "greeter")
		if err != nil || data["extra"] != "from the config" {
			t.Errorf("extra %q (%v), want the HelmChartConfig's", data["extra"], err)
		}
	})

	good := chart(t, "web", "1.2.0", "")
	repo := repository(t, map[string][]byte{"web-1.2.0.tgz": good, "web-1.0.0.tgz": chart(t, "web", "1.0.0", ""),
		"broken-1.0.0.tgz": chart(t, "broken", "1.0.0", broken), "web-1.3.0-rc.1.tgz": chart(t, "web", "1.3.0-rc.1", broken)})
	t.Run("from a chart repository: the version asked for, else the newest release", func(t *testing.T) {
		apply(fmt.Sprintf(`apiVersion: helm.cattle.io/v1
kind: HelmChart
metadata: {name: web, namespace: default}
spec:
  chart: web
  version: 1.0.0
  repo: %s
`, repo.URL))
		waitFor(t, "web 1.0.0 installed", func(ctx context.Context) (bool, string) {
			data, err := settings("default", "web")
			if err != nil {
				return false, err.Error()
			}
			return data["chart"] == "1.0.0", fmt.Sprint(data)
		})
		apply(fmt.Sprintf(`apiVersion: helm.cattle.io/v1
kind: HelmChart
metadata: {name: web, namespace: default}
spec:
  chart: web
  repo: %s
`, repo.URL))
		waitFor(t, "web upgraded to 1.2.0", func(ctx context.Context) (bool, string) {
			data, err := settings("default", "web")
			if err != nil {
				return false, err.Error()
			}
			return data["chart"] == "1.2.0", fmt.Sprint(data)
		})
	})

	t.Run("an upgrade that fails leaves the revision before it", func(t *testing.T) {
		apply(fmt.Sprintf(`apiVersion: helm.cattle.io/v1
kind: HelmChart
metadata: {name: web, namespace: default}
spec:
  chart: web
  version: 1.3.0-rc.1
  repo: %s
`, repo.URL))
		waitEvent(t, client, "default", "web", "UpgradeFailed")
		waitCondition(t, dyn, "default", "web", "Failed", "True")
		waitCondition(t, dyn, "default", "web", "Deployed", "True")
		if data, err := settings("default", "web"); err != nil || data["chart"] != "1.2.0" {
			t.Errorf("web's ConfigMap: %v (%v), want 1.2.0's", data, err)
		}
	})

	for _, tc := range []struct {
		name, spec, reason string
	}{
		{"a chart that does not render", fmt.Sprintf("chart: broken\n  repo: %s", repo.URL), "InstallFailed"},
		{"a chart the repository has not", fmt.Sprintf("chart: missing\n  repo: %s", repo.URL), "ChartNotFound"},
		{"an unreachable repository", "chart: web\n  repo: http://127.0.0.1:1", "RepositoryFailed"},
		{"chartContent that is not base64", "chartContent: '%%%'", "InvalidChart"},
		{"values that are not YAML", fmt.Sprintf("chartContent: %s\n  valuesContent: 'greeting: [unclosed'", content), "InvalidValues"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "bad-" + strings.ReplaceAll(strings.ToLower(tc.reason), " ", "-")
			apply(fmt.Sprintf("apiVersion: helm.cattle.io/v1\nkind: HelmChart\nmetadata: {name: %s, namespace: default}\nspec:\n  %s\n", name, tc.spec))
			waitEvent(t, client, "default", name, tc.reason)
			waitCondition(t, dyn, "default", name, "Failed", "True")
			if _, err := settings("default", name); !apierrors.IsNotFound(err) {
				t.Errorf("%s: the chart's ConfigMap: %v, want none applied", name, err)
			}
			if _, err := client.CoreV1().Secrets("default").Get(ctx, "sh.helm.release.v1."+name+".v1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("%s: a release record: %v, want none", name, err)
			}
			if err := dyn.Resource(helmCharts).Namespace("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("deleted while it installs: the install undone, nothing left", func(t *testing.T) {
		slow := base64.StdEncoding.EncodeToString(chart(t, "slow", "0.1.0", waiting))
		apply(fmt.Sprintf("apiVersion: helm.cattle.io/v1\nkind: HelmChart\nmetadata: {name: slow, namespace: default}\nspec:\n  chartContent: %s\n  timeout: 5s\n", slow))
		waitFor(t, "the install waiting on its hook", func(ctx context.Context) (bool, string) {
			_, err := client.BatchV1().Jobs("default").Get(ctx, "slow-wait", metav1.GetOptions{})
			return err == nil, fmt.Sprint(err)
		})
		if err := dyn.Resource(helmCharts).Namespace("default").Delete(ctx, "slow", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "slow gone, with its release", func(ctx context.Context) (bool, string) {
			_, errHC := dyn.Resource(helmCharts).Namespace("default").Get(ctx, "slow", metav1.GetOptions{})
			_, errJob := client.BatchV1().Jobs("default").Get(ctx, "slow-wait", metav1.GetOptions{})
			_, errCM := settings("default", "slow")
			secrets, err := client.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=slow"})
			if err != nil {
				return false, err.Error()
			}
			return apierrors.IsNotFound(errHC) && apierrors.IsNotFound(errJob) && apierrors.IsNotFound(errCM) && len(secrets.Items) == 0,
				fmt.Sprintf("HelmChart: %v; hook Job: %v; ConfigMap: %v; release records: %d", errHC, errJob, errCM, len(secrets.Items))
		})
	})

	t.Run("deleted: uninstalled", func(t *testing.T) {
		for _, hc := range []struct{ ns, name, target string }{{"kube-system", "greeter", "greeting"}, {"default", "web", "default"}} {
			if err := dyn.Resource(helmCharts).Namespace(hc.ns).Delete(ctx, hc.name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, hc.name+" uninstalled and gone", func(ctx context.Context) (bool, string) {
				_, errCM := settings(hc.target, hc.name)
				_, errHC := dyn.Resource(helmCharts).Namespace(hc.ns).Get(ctx, hc.name, metav1.GetOptions{})
				secrets, err := client.CoreV1().Secrets(hc.target).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + hc.name})
				if err != nil {
					return false, err.Error()
				}
				return apierrors.IsNotFound(errCM) && apierrors.IsNotFound(errHC) && len(secrets.Items) == 0,
					fmt.Sprintf("ConfigMap: %v; HelmChart: %v; release records: %d", errCM, errHC, len(secrets.Items))
			})
		}
	})
}

func waitFor(t *testing.T, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	var last string
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		ok, state := cond(ctx)
		last = state
		return ok, nil
	}); err != nil {
		t.Fatalf("%s: not within a minute; last: %s", what, last)
	}
}

// waitCondition waits until the HelmChart's condition typ has status.
func waitCondition(t *testing.T, dyn dynamic.Interface, ns, name, typ, status string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("HelmChart %s/%s %s=%s", ns, name, typ, status), func(ctx context.Context) (bool, string) {
		u, err := dyn.Resource(helmCharts).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == typ {
				return m["status"] == status, fmt.Sprint(conds)
			}
		}
		return false, fmt.Sprint(conds)
	})
}

// waitEvent waits for an event of reason about the HelmChart.
func waitEvent(t *testing.T, client kubernetes.Interface, ns, name, reason string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("a %s event on HelmChart %s/%s", reason, ns, name), func(ctx context.Context) (bool, string) {
		events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "HelmChart" && e.Reason == reason {
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, strings.Join(seen, "; ")
	})
}

// yamlToUnstructured reads a YAML object into u.
func yamlToUnstructured(obj string, u *unstructured.Unstructured) error {
	data, err := yaml.YAMLToJSON([]byte(obj))
	if err != nil {
		return err
	}
	return u.UnmarshalJSON(data)
}
