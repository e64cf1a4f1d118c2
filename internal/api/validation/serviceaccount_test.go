package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestValidateServiceAccount(t *testing.T) {
	tests := []struct {
		name string
		sa   *corev1.ServiceAccount
		want []string
	}{
		{name: "default", sa: &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "kube-system"}}},
		{name: "subdomain name", sa: &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "system.controller", Namespace: "kube-system"}}},
		{name: "invalid name", sa: &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "Builder", Namespace: "ci"}},
			want: []string{`metadata.name: Invalid value: "Builder": ` + dns1123SubdomainMsg}},
		{name: "missing name", sa: &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ci"}},
			want: []string{`metadata.name: Required value: name or generateName is required`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateServiceAccount(tc.sa), tc.want)
		})
	}
}

func TestValidateServiceAccountUpdate(t *testing.T) {
	old := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder", Namespace: "ci", ResourceVersion: "1"}}
	tests := []struct {
		name   string
		mutate func(*corev1.ServiceAccount)
		want   []string
	}{
		{name: "add image pull secret", mutate: func(sa *corev1.ServiceAccount) {
			sa.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
		}},
		{name: "missing resourceVersion", mutate: func(sa *corev1.ServiceAccount) { sa.ResourceVersion = "" },
			want: []string{`metadata.resourceVersion: Invalid value: "": must be specified for an update`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sa := old.DeepCopy()
			tc.mutate(sa)
			checkErrors(t, ValidateServiceAccountUpdate(sa, old), tc.want)
		})
	}
}
