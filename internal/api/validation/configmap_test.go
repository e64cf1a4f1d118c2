package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func configMap(mutate func(*corev1.ConfigMap)) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "default", ResourceVersion: "1"},
		Data:       map[string]string{"ca.crt": "-----BEGIN CERTIFICATE-----\n"},
	}
	if mutate != nil {
		mutate(cm)
	}
	return cm
}

func TestValidateConfigMap(t *testing.T) {
	const keyMsg = `a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`
	tests := []struct {
		name string
		cm   *corev1.ConfigMap
		want []string
	}{
		{name: "kube-root-ca.crt", cm: configMap(nil)},
		{name: "binary data", cm: configMap(func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"logo.png": {0x89, 'P'}} })},
		{name: "exactly 1 MiB", cm: configMap(func(cm *corev1.ConfigMap) {
			cm.Data = map[string]string{"a": strings.Repeat("x", maxDataSize/2)}
			cm.BinaryData = map[string][]byte{"b": make([]byte, maxDataSize/2)}
		})},
		{name: "over 1 MiB", cm: configMap(func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"a": strings.Repeat("x", maxDataSize+1)} }),
			// field.NewPath("") renders as "[]", in kube-apiserver too.
			want: []string{`[]: Too long: may not be more than 1048576 bytes`}},
		{name: "bad data key", cm: configMap(func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"a/b": ""} }),
			want: []string{`data[a/b]: Invalid value: "a/b": ` + keyMsg}},
		{name: "dot-dot data key", cm: configMap(func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"..": ""} }),
			want: []string{`data[..]: Invalid value: "..": must not be '..'`}},
		{name: "bad binaryData key", cm: configMap(func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"a b": nil} }),
			want: []string{`binaryData[a b]: Invalid value: "a b": ` + keyMsg}},
		{name: "key in both data and binaryData", cm: configMap(func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"ca.crt": nil} }),
			want: []string{`data[ca.crt]: Invalid value: "ca.crt": duplicate of key present in binaryData`}},
		{name: "invalid name", cm: configMap(func(cm *corev1.ConfigMap) { cm.Name = "CA" }),
			want: []string{`metadata.name: Invalid value: "CA": ` + dns1123SubdomainMsg}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateConfigMap(tc.cm), tc.want)
		})
	}
}

func TestValidateConfigMapUpdate(t *testing.T) {
	const frozen = "Forbidden: field is immutable when `immutable` is set"
	tests := []struct {
		name   string
		old    func(*corev1.ConfigMap)
		mutate func(*corev1.ConfigMap)
		want   []string
	}{
		{name: "change data", mutate: func(cm *corev1.ConfigMap) { cm.Data["ca.crt"] = "new" }},
		{name: "make immutable", mutate: func(cm *corev1.ConfigMap) { cm.Immutable = ptr(true) }},
		{name: "immutable, labels change", old: func(cm *corev1.ConfigMap) { cm.Immutable = ptr(true) },
			mutate: func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"a": "b"} }},
		{name: "immutable, data changes", old: func(cm *corev1.ConfigMap) { cm.Immutable = ptr(true) },
			mutate: func(cm *corev1.ConfigMap) {
				cm.Data["ca.crt"] = "new"
				cm.BinaryData = map[string][]byte{"x": nil}
			}, want: []string{"data: " + frozen, "binaryData: " + frozen}},
		{name: "immutable cannot be unset", old: func(cm *corev1.ConfigMap) { cm.Immutable = ptr(true) },
			mutate: func(cm *corev1.ConfigMap) { cm.Immutable = nil }, want: []string{"immutable: " + frozen}},
		{name: "immutable cannot be set false", old: func(cm *corev1.ConfigMap) { cm.Immutable = ptr(true) },
			mutate: func(cm *corev1.ConfigMap) { cm.Immutable = ptr(false) }, want: []string{"immutable: " + frozen}},
		{name: "immutable, empty and absent data are the same", old: func(cm *corev1.ConfigMap) { cm.Immutable, cm.Data = ptr(true), nil },
			mutate: func(cm *corev1.ConfigMap) { cm.Data = map[string]string{} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := configMap(tc.old)
			cm := old.DeepCopy()
			tc.mutate(cm)
			checkErrors(t, ValidateConfigMapUpdate(cm, old), tc.want)
		})
	}
}
