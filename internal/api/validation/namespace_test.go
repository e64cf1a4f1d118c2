package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeboot/kubeboot/internal/api/defaults"
)

func namespace(name string, mutate func(*corev1.Namespace)) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}}
	if mutate != nil {
		mutate(ns)
	}
	defaults.Namespace(ns)
	return ns
}

func TestValidateNamespace(t *testing.T) {
	tests := []struct {
		name string
		ns   *corev1.Namespace
		want []string
	}{
		{name: "kube-system", ns: namespace("kube-system", nil)},
		{name: "kubernetes finalizer", ns: namespace("team-a", func(ns *corev1.Namespace) {
			ns.Spec.Finalizers = []corev1.FinalizerName{corev1.FinalizerKubernetes}
		})},
		{name: "generated name, label not set yet", ns: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-x7k2p", GenerateName: "team-"}}},
		{name: "invalid name", ns: namespace("Team_A", nil),
			want: []string{`metadata.name: Invalid value: "Team_A": ` + dns1123LabelMsg}},
		{name: "dots are not allowed", ns: namespace("team.a", nil),
			want: []string{`metadata.name: Invalid value: "team.a": must not contain dots`}},
		{name: "namespace set on a cluster-scoped object", ns: namespace("team-a", func(ns *corev1.Namespace) { ns.Namespace = "default" }),
			want: []string{`metadata.namespace: Forbidden: not allowed on this type`}},
		{name: "name label differs from name", ns: func() *corev1.Namespace {
			ns := namespace("team-a", nil)
			ns.Labels[corev1.LabelMetadataName] = "team-b"
			return ns
		}(), want: []string{`metadata.labels[kubernetes.io/metadata.name]: Invalid value: "team-b": must be 'team-a'`}},
		{name: "unqualified spec finalizer", ns: namespace("team-a", func(ns *corev1.Namespace) {
			ns.Spec.Finalizers = []corev1.FinalizerName{"cleanup"}
		}), want: []string{`spec.finalizers: Invalid value: "cleanup": name is neither a standard finalizer name nor is it fully qualified`}},
		{name: "unqualified metadata finalizer", ns: namespace("team-a", func(ns *corev1.Namespace) {
			ns.Finalizers = []string{"cleanup"}
		}), want: []string{`metadata.finalizers[0]: Invalid value: "cleanup": name is neither a standard finalizer name nor is it fully qualified`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateNamespace(tc.ns), tc.want)
		})
	}
}

func TestValidateNamespaceUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Namespace)
		want   []string
	}{
		{name: "add a label", mutate: func(ns *corev1.Namespace) { ns.Labels["team"] = "a" }},
		{name: "rename", mutate: func(ns *corev1.Namespace) { ns.Name = "team-b" },
			want: []string{
				`metadata.name: Invalid value: "team-b": field is immutable`,
				`metadata.labels[kubernetes.io/metadata.name]: Invalid value: "team-a": must be 'team-b'`,
			}},
		{name: "change the name label", mutate: func(ns *corev1.Namespace) { ns.Labels[corev1.LabelMetadataName] = "other" },
			want: []string{`metadata.labels[kubernetes.io/metadata.name]: Invalid value: "other": must be 'team-a'`}},
		{name: "bad spec finalizer", mutate: func(ns *corev1.Namespace) { ns.Spec.Finalizers = []corev1.FinalizerName{"cleanup"} },
			want: []string{`spec.finalizers[0]: Invalid value: "cleanup": name is neither a standard finalizer name nor is it fully qualified`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := namespace("team-a", nil)
			ns := old.DeepCopy()
			tc.mutate(ns)
			checkErrors(t, ValidateNamespaceUpdate(ns, old), tc.want)
		})
	}
}

func TestValidateNamespaceStatusUpdate(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name     string
		deleting bool
		phase    corev1.NamespacePhase
		want     []string
	}{
		{name: "active", phase: corev1.NamespaceActive},
		{name: "terminating while deleted", deleting: true, phase: corev1.NamespaceTerminating},
		{name: "terminating while not deleted", phase: corev1.NamespaceTerminating,
			want: []string{"status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"}},
		{name: "active while deleted", deleting: true, phase: corev1.NamespaceActive,
			want: []string{"status.Phase: Invalid value: \"Active\": may only be 'Terminating' if `deletionTimestamp` is not empty"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := namespace("team-a", nil)
			if tc.deleting {
				old.DeletionTimestamp = &now
			}
			ns := old.DeepCopy()
			ns.Status.Phase = tc.phase
			checkErrors(t, ValidateNamespaceStatusUpdate(ns, old), tc.want)
		})
	}
}

func TestValidateNamespaceFinalizeUpdate(t *testing.T) {
	tests := []struct {
		name       string
		finalizers []corev1.FinalizerName
		want       []string
	}{
		{name: "remove all", finalizers: nil},
		{name: "qualified", finalizers: []corev1.FinalizerName{"kubernetes", "example.com/cleanup"}},
		{name: "unqualified", finalizers: []corev1.FinalizerName{"kubernetes", "cleanup"},
			want: []string{`spec.finalizers[1]: Invalid value: "cleanup": name is neither a standard finalizer name nor is it fully qualified`}},
		{name: "not a qualified name", finalizers: []corev1.FinalizerName{"example.com/a/b"},
			want: []string{`spec.finalizers[0]: Invalid value: "example.com/a/b": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := namespace("team-a", func(ns *corev1.Namespace) { ns.Spec.Finalizers = []corev1.FinalizerName{"kubernetes"} })
			ns := old.DeepCopy()
			ns.Spec.Finalizers = tc.finalizers
			checkErrors(t, ValidateNamespaceFinalizeUpdate(ns, old), tc.want)
		})
	}
}
