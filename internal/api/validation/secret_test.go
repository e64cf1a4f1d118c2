package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeboot/kubeboot/internal/api/defaults"
)

func secret(typ corev1.SecretType, data map[string][]byte, mutate func(*corev1.Secret)) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "default", ResourceVersion: "1"},
		Type:       typ,
		Data:       data,
	}
	if mutate != nil {
		mutate(s)
	}
	defaults.Secret(s)
	return s
}

func TestValidateSecret(t *testing.T) {
	tests := []struct {
		name string
		s    *corev1.Secret
		want []string
	}{
		{name: "opaque (defaulted)", s: secret("", map[string][]byte{"password": []byte("x")}, nil)},
		{name: "custom type", s: secret("example.com/token", nil, nil)},
		{name: "tls", s: secret(corev1.SecretTypeTLS, map[string][]byte{"tls.crt": nil, "tls.key": nil}, nil)},
		{name: "tls from stringData", s: secret(corev1.SecretTypeTLS, nil, func(s *corev1.Secret) {
			s.StringData = map[string]string{"tls.crt": "c", "tls.key": "k"}
		})},
		{name: "tls without key pair", s: secret(corev1.SecretTypeTLS, nil, nil),
			want: []string{`data[tls.crt]: Required value`, `data[tls.key]: Required value`}},
		{name: "service account token", s: secret(corev1.SecretTypeServiceAccountToken, nil, func(s *corev1.Secret) {
			s.Annotations = map[string]string{corev1.ServiceAccountNameKey: "default"}
		})},
		{name: "service account token without account", s: secret(corev1.SecretTypeServiceAccountToken, nil, nil),
			want: []string{`metadata.annotations[kubernetes.io/service-account.name]: Required value`}},
		{name: "dockerconfigjson", s: secret(corev1.SecretTypeDockerConfigJson, map[string][]byte{".dockerconfigjson": []byte(`{"auths":{}}`)}, nil)},
		{name: "dockerconfigjson missing", s: secret(corev1.SecretTypeDockerConfigJson, nil, nil),
			want: []string{`data[.dockerconfigjson]: Required value`}},
		{name: "dockerconfigjson not JSON, contents redacted", s: secret(corev1.SecretTypeDockerConfigJson, map[string][]byte{".dockerconfigjson": []byte(`hunter2`)}, nil),
			want: []string{`data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": invalid character 'h' looking for beginning of value`}},
		{name: "dockercfg missing", s: secret(corev1.SecretTypeDockercfg, nil, nil),
			want: []string{`data[.dockercfg]: Required value`}},
		{name: "basic auth with only a username", s: secret(corev1.SecretTypeBasicAuth, map[string][]byte{"username": nil}, nil)},
		{name: "basic auth empty", s: secret(corev1.SecretTypeBasicAuth, nil, nil),
			want: []string{`data[username]: Required value`, `data[password]: Required value`}},
		{name: "ssh auth empty key", s: secret(corev1.SecretTypeSSHAuth, map[string][]byte{"ssh-privatekey": {}}, nil),
			want: []string{`data[ssh-privatekey]: Required value`}},
		{name: "bad key", s: secret("", map[string][]byte{"a/b": nil}, nil),
			want: []string{`data[a/b]: Invalid value: "a/b": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`}},
		{name: "bad stringData key is reported under data", s: secret("", nil, func(s *corev1.Secret) { s.StringData = map[string]string{".": "x"} }),
			want: []string{`data[.]: Invalid value: ".": must not be '.'`}},
		{name: "over 1 MiB", s: secret("", map[string][]byte{"a": make([]byte, maxDataSize/2), "b": make([]byte, maxDataSize/2+1)}, nil),
			want: []string{`data: Too long: may not be more than 1048576 bytes`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateSecret(tc.s), tc.want)
		})
	}
}

func TestValidateSecretUpdate(t *testing.T) {
	const frozen = "Forbidden: field is immutable when `immutable` is set"
	tests := []struct {
		name   string
		old    func(*corev1.Secret)
		mutate func(*corev1.Secret)
		want   []string
	}{
		{name: "rotate data", mutate: func(s *corev1.Secret) { s.Data["password"] = []byte("y") }},
		{name: "type is fixed", mutate: func(s *corev1.Secret) { s.Type = corev1.SecretTypeBasicAuth },
			want: []string{`type: Invalid value: "kubernetes.io/basic-auth": field is immutable`}},
		{name: "immutable, data changes", old: func(s *corev1.Secret) { s.Immutable = ptr(true) },
			mutate: func(s *corev1.Secret) { s.Data["password"] = []byte("y") }, want: []string{"data: " + frozen}},
		{name: "immutable, stringData changes data", old: func(s *corev1.Secret) { s.Immutable = ptr(true) },
			mutate: func(s *corev1.Secret) { s.StringData = map[string]string{"password": "y"} }, want: []string{"data: " + frozen}},
		{name: "immutable, stringData repeats data", old: func(s *corev1.Secret) { s.Immutable = ptr(true) },
			mutate: func(s *corev1.Secret) { s.StringData = map[string]string{"password": "x"} }},
		{name: "immutable cannot be unset", old: func(s *corev1.Secret) { s.Immutable = ptr(true) },
			mutate: func(s *corev1.Secret) { s.Immutable = nil }, want: []string{"immutable: " + frozen}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := secret("", map[string][]byte{"password": []byte("x")}, tc.old)
			s := old.DeepCopy()
			tc.mutate(s)
			checkErrors(t, ValidateSecretUpdate(s, old), tc.want)
		})
	}
}
