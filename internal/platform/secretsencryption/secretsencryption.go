// Package secretsencryption is k3s's --secrets-encryption for kubeboot: an
// encryption configuration for Secrets kept in the data dir, with a key
// generated on first start, and k3s's cycle of stages that change it on a
// running cluster (prepare, rotate, reencrypt, enable, disable and the
// one-step rotate-keys), shared by every server through a record in the
// cluster (record.go) and taken by each without a restart.
//
// The configuration is kube-apiserver's EncryptionConfiguration for
// Secrets: aescbc or secretbox keys, the first of which writes, and
// identity, which reads what was stored before encryption was on (or
// writes, when encryption is disabled). The server loads it with
// --encryption-provider-config-automatic-reload.
package secretsencryption

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// ConfigPath is where --secrets-encryption keeps its configuration in a
// data dir.
func ConfigPath(dataDir string) string { return filepath.Join(dataDir, "encryption", "config.yaml") }

// secrets is the resource the configuration encrypts.
var secrets = schema.GroupResource{Resource: "secrets"}

// The providers a configuration of --secrets-encryption holds: the key
// types of --secrets-encryption-provider, and identity.
const (
	AESCBC    = "aescbc"
	Secretbox = "secretbox"
	Identity  = "identity"
)

// Providers are --secrets-encryption-provider's values.
var Providers = []string{AESCBC, Secretbox}

// Key is one key of a configuration: a provider's named secret, or
// identity, which has none.
type Key struct {
	Provider     string
	Name, Secret string
}

// TypeName is the key's type as k3s's status shows it.
func (k Key) TypeName() string {
	switch k.Provider {
	case AESCBC:
		return "AES-CBC"
	case Secretbox:
		return "XSalsa20-POLY1305"
	}
	return "Identity"
}

// String names the key: its name, or identity.
func (k Key) String() string {
	if k.Provider == Identity {
		return Identity
	}
	return k.Name
}

// Config is a configuration's keys for Secrets, in order: the first
// writes, every one reads.
type Config []Key

// Writer is the key that writes.
func (c Config) Writer() Key { return c[0] }

// Enabled says whether Secrets are written encrypted.
func (c Config) Enabled() bool { return c[0].Provider != Identity }

// Ensure writes, unless path exists, a configuration that encrypts Secrets
// with a new key of provider (0600, in a 0700 directory), and reports
// whether it wrote one.
func Ensure(path, provider string, now time.Time) (bool, error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	key, err := newKey(provider, nil, now)
	if err != nil {
		return false, err
	}
	data, err := Config{key, {Provider: Identity}}.Marshal()
	if err != nil {
		return false, err
	}
	return true, pki.WriteFile(path, data, 0o600)
}

// newKey is a random 32-byte key of provider (both aescbc's AES-256 and
// secretbox take 32 bytes), named for provider and now, unlike any key of
// c.
func newKey(provider string, c Config, now time.Time) (Key, error) {
	if !slices.Contains(Providers, provider) {
		return Key{}, fmt.Errorf("provider %q is none of %s", provider, strings.Join(Providers, ", "))
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return Key{}, err
	}
	key := Key{Provider: provider, Name: fmt.Sprintf("%s-%d", provider, now.UnixNano()), Secret: base64.StdEncoding.EncodeToString(secret)}
	if slices.ContainsFunc(c, func(k Key) bool { return k.Name == key.Name }) {
		return Key{}, fmt.Errorf("a key named %s exists already", key.Name)
	}
	return key, nil
}

// Marshal is the configuration as an EncryptionConfiguration: a provider
// for each run of keys of one provider.
func (c Config) Marshal() ([]byte, error) {
	var providers []apiserverv1.ProviderConfiguration
	for i, k := range c {
		if i > 0 && c[i-1].Provider == k.Provider && k.Provider != Identity {
			p := &providers[len(providers)-1]
			keys := &p.AESCBC.Keys
			if k.Provider == Secretbox {
				keys = &p.Secretbox.Keys
			}
			*keys = append(*keys, apiserverv1.Key{Name: k.Name, Secret: k.Secret})
			continue
		}
		keys := []apiserverv1.Key{{Name: k.Name, Secret: k.Secret}}
		switch k.Provider {
		case AESCBC:
			providers = append(providers, apiserverv1.ProviderConfiguration{AESCBC: &apiserverv1.AESConfiguration{Keys: keys}})
		case Secretbox:
			providers = append(providers, apiserverv1.ProviderConfiguration{Secretbox: &apiserverv1.SecretboxConfiguration{Keys: keys}})
		case Identity:
			providers = append(providers, apiserverv1.ProviderConfiguration{Identity: &apiserverv1.IdentityConfiguration{}})
		default:
			return nil, fmt.Errorf("key %s: unknown provider %q", k.Name, k.Provider)
		}
	}
	return yaml.Marshal(apiserverv1.EncryptionConfiguration{
		TypeMeta:  metav1.TypeMeta{APIVersion: apiserverv1.SchemeGroupVersion.String(), Kind: "EncryptionConfiguration"},
		Resources: []apiserverv1.ResourceConfiguration{{Resources: []string{secrets.Resource}, Providers: providers}},
	})
}

// ParseConfig reads a configuration of --secrets-encryption: Secrets'
// providers, each aescbc, secretbox or identity.
func ParseConfig(data []byte) (Config, error) {
	var cfg apiserverv1.EncryptionConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, err
	}
	if len(cfg.Resources) != 1 || !slices.Equal(cfg.Resources[0].Resources, []string{secrets.Resource}) {
		return nil, errors.New("not a configuration of --secrets-encryption: it must configure secrets alone")
	}
	var c Config
	for _, p := range cfg.Resources[0].Providers {
		switch {
		case p.AESCBC != nil:
			for _, k := range p.AESCBC.Keys {
				c = append(c, Key{Provider: AESCBC, Name: k.Name, Secret: k.Secret})
			}
		case p.Secretbox != nil:
			for _, k := range p.Secretbox.Keys {
				c = append(c, Key{Provider: Secretbox, Name: k.Name, Secret: k.Secret})
			}
		case p.Identity != nil:
			c = append(c, Key{Provider: Identity})
		default:
			return nil, errors.New("not a configuration of --secrets-encryption: a provider other than aescbc, secretbox and identity")
		}
	}
	if len(c) == 0 {
		return nil, errors.New("not a configuration of --secrets-encryption: no key")
	}
	return c, nil
}

// ReadConfig reads the configuration at path.
func ReadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// contentHash names a configuration's content in the record.
func contentHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// CountSecrets counts the Secrets under prefix in etcd by the key that
// stored them: a key's name, or identity.
func CountSecrets(ctx context.Context, client *clientv3.Client, prefix string) (map[string]int, error) {
	resp, err := client.Get(ctx, secretsPrefix(prefix), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, kv := range resp.Kvs {
		counts[keyOf(kv.Value)]++
	}
	return counts, nil
}

// secretsPrefix is where Secrets are stored under prefix.
func secretsPrefix(prefix string) string { return path.Join("/", prefix, secrets.Resource) + "/" }

// keyOf names the key that stored a value: an aescbc or secretbox key's
// name, another provider's prefix, or identity.
func keyOf(v []byte) string {
	if !bytes.HasPrefix(v, []byte("k8s:enc:")) {
		return Identity
	}
	fields := strings.SplitN(string(v), ":", 6)
	if len(fields) == 6 && (fields[2] == AESCBC || fields[2] == Secretbox) {
		return fields[4]
	}
	return strings.Join(fields[:min(len(fields), 4)], ":")
}
