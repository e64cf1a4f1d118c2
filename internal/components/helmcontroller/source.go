package helmcontroller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kubeboot/kubeboot/internal/platform/reason"

	repo "helm.sh/helm/v4/pkg/repo/v1"
	"helm.sh/helm/v4/pkg/strvals"
)

// The reasons of a failure to get the chart or its values whose cause is
// the HelmChart's (or its repository's), for its Warning event and
// condition (reason.Error).
const (
	reasonInvalidChart  = "InvalidChart"
	reasonChartNotFound = "ChartNotFound"
	reasonRepoFailed    = "RepositoryFailed"
	reasonInvalidValues = "InvalidValues"
)

// maxChartSize bounds a chart archive read from a repository.
const maxChartSize = 20 << 20

// fetchTimeout bounds each request to a chart repository.
const fetchTimeout = 30 * time.Second

// chartArchive is the chart's archive (.tgz) the HelmChart names:
// chartContent, the archive at chart's URL, or chart (at version) in
// repo's index.
func chartArchive(ctx context.Context, client kubernetes.Interface, hc *HelmChart, cacheDir string) ([]byte, error) {
	s := hc.Spec
	if s.ChartContent != "" {
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s.ChartContent))
		if err != nil {
			return nil, reason.Errorf(reasonInvalidChart, "spec.chartContent: not base64: %v", err)
		}
		return b, nil
	}
	if s.Chart == "" {
		return nil, reason.Errorf(reasonInvalidChart, "spec.chart: neither a chart nor spec.chartContent given")
	}
	if strings.HasPrefix(s.Chart, "oci://") {
		return nil, reason.Errorf(reasonInvalidChart, "spec.chart %s: OCI registries are not supported; give the chart's repository, its URL or spec.chartContent", s.Chart)
	}
	httpClient, err := repoClient(ctx, client, hc)
	if err != nil {
		return nil, err
	}
	// A client per look, whose connections go with it.
	defer httpClient.CloseIdleConnections()
	user, password, err := repoAuth(ctx, client, hc)
	if err != nil {
		return nil, err
	}
	chartURL := s.Chart
	if u, err := url.Parse(s.Chart); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		if s.Repo == "" {
			return nil, reason.Errorf(reasonInvalidChart, "spec.chart %q: a chart's name needs spec.repo (or give its URL)", s.Chart)
		}
		if chartURL, err = findInRepo(ctx, httpClient, user, password, s.Repo, s.Chart, s.Version, cacheDir); err != nil {
			return nil, err
		}
	}
	// Credentials go to the repository's host only, unless
	// authPassCredentials.
	if !s.AuthPassCredentials && s.Repo != "" && !sameHost(chartURL, s.Repo) {
		user, password = "", ""
	}
	b, err := get(ctx, httpClient, user, password, chartURL)
	if err != nil {
		return nil, reason.Errorf(reasonRepoFailed, "chart %s: %v", chartURL, err)
	}
	return b, nil
}

// findInRepo is the URL of chart at version (the newest, if empty) in
// the index of the repository at repoURL.
func findInRepo(ctx context.Context, c *http.Client, user, password, repoURL, chart, version, cacheDir string) (string, error) {
	indexURL := strings.TrimSuffix(repoURL, "/") + "/index.yaml"
	b, err := get(ctx, c, user, password, indexURL)
	if err != nil {
		return "", reason.Errorf(reasonRepoFailed, "spec.repo %s: %v", repoURL, err)
	}
	// Helm's index loader reads a file.
	f, err := os.CreateTemp(cacheDir, "index-*.yaml")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	index, err := repo.LoadIndexFile(f.Name())
	if err != nil {
		return "", reason.Errorf(reasonRepoFailed, "spec.repo %s: its index.yaml: %v", repoURL, err)
	}
	cv, err := index.Get(chart, version)
	if err != nil {
		what := fmt.Sprintf("chart %q", chart)
		if version != "" {
			what += fmt.Sprintf(" version %q", version)
		}
		return "", reason.Errorf(reasonChartNotFound, "spec.repo %s has no %s", repoURL, what)
	}
	if len(cv.URLs) == 0 {
		return "", reason.Errorf(reasonRepoFailed, "spec.repo %s: chart %s %s has no URL", repoURL, chart, cv.Version)
	}
	u, err := repo.ResolveReferenceURL(repoURL, cv.URLs[0])
	if err != nil {
		return "", reason.Errorf(reasonRepoFailed, "spec.repo %s: chart %s's URL %q: %v", repoURL, chart, cv.URLs[0], err)
	}
	return u, nil
}

// get reads url, with basic auth if user is set.
func get(ctx context.Context, c *http.Client, user, password, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if user != "" || password != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxChartSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxChartSize {
		return nil, fmt.Errorf("GET %s: larger than %d MiB", url, maxChartSize>>20)
	}
	return b, nil
}

// repoClient is the HTTP client for the HelmChart's repository: its CAs
// (repoCA, repoCAConfigMap) added to the system's.
func repoClient(ctx context.Context, client kubernetes.Interface, hc *HelmChart) (*http.Client, error) {
	s := hc.Spec
	tlsConfig := &tls.Config{InsecureSkipVerify: s.InsecureSkipTLSVerify} //nolint:gosec // the user's choice (spec.insecureSkipTLSVerify)
	var pems [][]byte
	if s.RepoCA != "" {
		pems = append(pems, []byte(s.RepoCA))
	}
	if s.RepoCAConfigMap != nil && s.RepoCAConfigMap.Name != "" {
		cm, err := client.CoreV1().ConfigMaps(hc.Namespace).Get(ctx, s.RepoCAConfigMap.Name, metav1.GetOptions{})
		if err != nil {
			return nil, reason.Errorf(reasonRepoFailed, "spec.repoCAConfigMap %s: %v", s.RepoCAConfigMap.Name, err)
		}
		for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
			pems = append(pems, []byte(cm.Data[k]))
		}
	}
	if len(pems) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		for _, p := range pems {
			if !pool.AppendCertsFromPEM(p) {
				return nil, reason.Errorf(reasonRepoFailed, "spec.repoCA: no PEM certificate")
			}
		}
		tlsConfig.RootCAs = pool
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig, Proxy: http.ProxyFromEnvironment}}, nil
}

// repoAuth is the username and password of authSecret, if any.
func repoAuth(ctx context.Context, client kubernetes.Interface, hc *HelmChart) (user, password string, _ error) {
	ref := hc.Spec.AuthSecret
	if ref == nil || ref.Name == "" {
		return "", "", nil
	}
	secret, err := client.CoreV1().Secrets(hc.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return "", "", reason.Errorf(reasonRepoFailed, "spec.authSecret %s: %v", ref.Name, err)
	}
	return string(secret.Data["username"]), string(secret.Data["password"]), nil
}

func sameHost(a, b string) bool {
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	return errA == nil && errB == nil && ua.Host == ub.Host
}

// values are the release's values: the HelmChart's valuesContent and
// valuesSecrets, then its HelmChartConfig's (nil: none), each merged over
// the ones before, then set, as helm's --set.
func values(ctx context.Context, client kubernetes.Interface, hc *HelmChart, config *HelmChartConfig) (map[string]any, error) {
	out := map[string]any{}
	type file struct{ source, content string }
	var files []file
	add := func(who, content string, secrets []secretSpec) error {
		if strings.TrimSpace(content) != "" {
			files = append(files, file{who + " valuesContent", content})
		}
		for _, s := range secrets {
			secret, err := client.CoreV1().Secrets(hc.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return reason.Errorf(reasonInvalidValues, "%s valuesSecrets: Secret %s/%s not found", who, hc.Namespace, s.Name)
			} else if err != nil {
				return err
			}
			keys := s.Keys
			if len(keys) == 0 {
				keys = slices.Sorted(maps.Keys(secret.Data))
			}
			for _, k := range keys {
				v, ok := secret.Data[k]
				if !ok {
					return reason.Errorf(reasonInvalidValues, "%s valuesSecrets: Secret %s has no key %q", who, s.Name, k)
				}
				files = append(files, file{fmt.Sprintf("%s valuesSecrets %s[%s]", who, s.Name, k), string(v)})
			}
		}
		return nil
	}
	if err := add("spec", hc.Spec.ValuesContent, hc.Spec.ValuesSecrets); err != nil {
		return nil, err
	}
	if config != nil {
		if err := add("HelmChartConfig "+config.Name, config.Spec.ValuesContent, config.Spec.ValuesSecrets); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		var v map[string]any
		if err := yaml.Unmarshal([]byte(f.content), &v); err != nil {
			return nil, reason.Errorf(reasonInvalidValues, "%s: %v", f.source, err)
		}
		mergeValues(out, v)
	}
	for _, k := range slices.Sorted(maps.Keys(hc.Spec.Set)) {
		// Numbers and booleans as --set takes them, other strings as
		// --set-string (as k3s's controller does).
		v, parse := hc.Spec.Set[k], strvals.ParseIntoString
		if v.Type == intstr.Int || v.StrVal == "true" || v.StrVal == "false" {
			parse = strvals.ParseInto
		}
		if err := parse(k+"="+v.String(), out); err != nil {
			return nil, reason.Errorf(reasonInvalidValues, "spec.set[%s]: %v", k, err)
		}
	}
	return out, nil
}

// mergeValues merges src into dst: maps key by key, anything else
// replaced, as Helm merges values files.
func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// cacheDirIn is where the controller keeps repositories' indexes while it
// reads them.
func cacheDirIn(dataDir string) string { return filepath.Join(dataDir, "server", "helm") }
