package helmcontroller

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeboot/kubeboot/internal/platform/reason"
)

// FuzzValues: a HelmChart's valuesContent, its HelmChartConfig's and a
// spec.set entry, whatever a user writes, become the release's values or
// an InvalidValues error naming which was wrong; never a panic.
func FuzzValues(f *testing.F) {
	for _, seed := range []struct{ content, config, key, value string }{
		{"greeting: hello\nreplicas: 2\n", "greeting: hi\n", "image.tag", "v1"},
		{"a:\n  b:\n    c: [1, 2]\n", "a:\n  b: null\n", "a.b.c[0]", "3"},
		{"greeting: [unclosed", "", "x", "y"},
		{"- a list\n- not a map\n", "", "", ""},
		{"", "", "servers[0].port", "80"},
		{"&a [*a]", "", "a=b", "c"},
		{"", "", "a[999999]", "1"},
	} {
		f.Add(seed.content, seed.config, seed.key, seed.value)
	}
	f.Fuzz(func(t *testing.T, content, configContent, key, value string) {
		hc := &HelmChart{ObjectMeta: metav1.ObjectMeta{Name: "chart", Namespace: "kube-system"}}
		hc.Spec.ValuesContent = content
		if key != "" {
			hc.Spec.Set = map[string]intstr.IntOrString{key: intstr.FromString(value)}
		}
		config := &HelmChartConfig{ObjectMeta: metav1.ObjectMeta{Name: "chart", Namespace: "kube-system"}}
		config.Spec.ValuesContent = configContent
		out, err := values(context.Background(), fake.NewClientset(), hc, config)
		if err != nil {
			if got := reason.Of(err, ""); got != reasonInvalidValues {
				t.Fatalf("values: %v (reason %q), want an %s error", err, got, reasonInvalidValues)
			}
			return
		}
		if out == nil {
			t.Fatal("no values and no error")
		}
	})
}
