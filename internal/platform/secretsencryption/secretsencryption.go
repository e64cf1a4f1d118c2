// Package secretsencryption is k3s's --secrets-encryption for kubeboot: an
// encryption configuration for Secrets kept in the data dir, with a key
// generated on first start, and the rotation of that key with every
// Secret re-encrypted on a running server.
//
// The configuration is kube-apiserver's EncryptionConfiguration: Secrets
// are encrypted with aescbc, the first key writes, every key listed reads,
// and identity reads what was stored before encryption was on. The server
// loads it with --encryption-provider-config-automatic-reload, so a
// rotation needs no restart.
package secretsencryption

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"k8s.io/apiserver/pkg/server/options/encryptionconfig"
	"k8s.io/apiserver/pkg/storage/value"
	"sigs.k8s.io/yaml"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// ConfigPath is where --secrets-encryption keeps its configuration in a
// data dir.
func ConfigPath(dataDir string) string { return filepath.Join(dataDir, "encryption", "config.yaml") }

// secrets is the resource the configuration encrypts.
var secrets = schema.GroupResource{Resource: "secrets"}

// keyPrefix is how a value encrypted with the aescbc key name begins in
// etcd.
func keyPrefix(name string) string { return "k8s:enc:aescbc:v1:" + name + ":" }

// Ensure writes, unless path exists, a configuration that encrypts Secrets
// with a new aescbc key (0600, in a 0700 directory), and reports whether it
// wrote one.
func Ensure(path string, now time.Time) (bool, error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	key, err := newKey(now)
	if err != nil {
		return false, err
	}
	return true, write(path, []apiserverv1.Key{key})
}

// newKey is a random 32-byte aescbc key named for now.
func newKey(now time.Time) (apiserverv1.Key, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return apiserverv1.Key{}, err
	}
	return apiserverv1.Key{Name: fmt.Sprintf("aescbc-%d", now.UnixNano()), Secret: base64.StdEncoding.EncodeToString(secret)}, nil
}

// write writes a configuration with keys (the first writes) to path.
func write(path string, keys []apiserverv1.Key) error {
	cfg := apiserverv1.EncryptionConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: apiserverv1.SchemeGroupVersion.String(), Kind: "EncryptionConfiguration"},
		Resources: []apiserverv1.ResourceConfiguration{{
			Resources: []string{secrets.Resource},
			Providers: []apiserverv1.ProviderConfiguration{
				{AESCBC: &apiserverv1.AESConfiguration{Keys: keys}},
				{Identity: &apiserverv1.IdentityConfiguration{}},
			},
		}},
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return pki.WriteFile(path, data, 0o600)
}

// readKeys returns the aescbc keys of the configuration at path, the one
// that writes first.
func readKeys(path string) ([]apiserverv1.Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cfg apiserverv1.EncryptionConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, r := range cfg.Resources {
		if slices.Contains(r.Resources, secrets.Resource) && len(r.Providers) > 0 && r.Providers[0].AESCBC != nil {
			return r.Providers[0].AESCBC.Keys, nil
		}
	}
	return nil, fmt.Errorf("%s is not a --secrets-encryption configuration: no aescbc provider first for secrets", path)
}

// Status is how the Secrets are encrypted.
type Status struct {
	// Keys are the configuration's key names, the one that writes first.
	Keys []string
	// Secrets counts the Secrets in etcd by the key that encrypted them;
	// "identity" counts those stored unencrypted.
	Secrets map[string]int
}

// ReadStatus reads the configuration at path and counts the Secrets under
// prefix in etcd by their key.
func ReadStatus(ctx context.Context, path string, client *clientv3.Client, prefix string) (Status, error) {
	keys, err := readKeys(path)
	if err != nil {
		return Status{}, err
	}
	st := Status{Secrets: map[string]int{}}
	for _, k := range keys {
		st.Keys = append(st.Keys, k.Name)
	}
	resp, err := client.Get(ctx, secretsPrefix(prefix), clientv3.WithPrefix())
	if err != nil {
		return Status{}, err
	}
	for _, kv := range resp.Kvs {
		st.Secrets[keyOf(kv.Value)]++
	}
	return st, nil
}

// secretsPrefix is where Secrets are stored under prefix.
func secretsPrefix(prefix string) string { return path.Join("/", prefix, secrets.Resource) + "/" }

// keyOf names the key that encrypted a stored value: an aescbc key's name,
// another provider's prefix, or "identity".
func keyOf(v []byte) string {
	if !bytes.HasPrefix(v, []byte("k8s:enc:")) {
		return "identity"
	}
	fields := strings.SplitN(string(v), ":", 6)
	if len(fields) == 6 && fields[2] == "aescbc" {
		return fields[4]
	}
	return strings.Join(fields[:min(len(fields), 4)], ":")
}

// Rotation rotates the key of the configuration at Path on a running
// server: a new key is written first (the server, which reloads the file,
// then writes with it and still reads with the old ones), every Secret is
// re-encrypted with it, and the old keys are dropped.
type Rotation struct {
	// Path is the configuration's file.
	Path string
	// Client reaches the server's etcd; Prefix is its key prefix.
	Client *clientv3.Client
	Prefix string
	// Loaded waits until the server has loaded the configuration whose
	// file content has hash (kube-apiserver's
	// apiserver_encryption_config_controller_last_config_info).
	Loaded func(ctx context.Context, hash string) error
	// Progress, if set, is told how many Secrets are done of how many.
	Progress func(done, total int)
}

// Rotated is what a rotation did.
type Rotated struct {
	// Key is the new key's name.
	Key string
	// Secrets is how many Secrets were read, Reencrypted how long their
	// re-encryption took (without the waits for the server's reloads).
	Secrets     int
	Reencrypted time.Duration
}

// Run rotates. A Secret written meanwhile through the server is written
// with the new key already; one changed between a read and its rewrite
// here is read again.
func (r Rotation) Run(ctx context.Context, now time.Time) (Rotated, error) {
	keys, err := readKeys(r.Path)
	if err != nil {
		return Rotated{}, err
	}
	key, err := newKeyFor(keys, now)
	if err != nil {
		return Rotated{}, err
	}
	if err := r.apply(ctx, append([]apiserverv1.Key{key}, keys...)); err != nil {
		return Rotated{}, err
	}
	start := time.Now()
	n, err := r.reencrypt(ctx)
	if err != nil {
		return Rotated{}, err
	}
	done := Rotated{Key: key.Name, Secrets: n, Reencrypted: time.Since(start)}
	return done, r.apply(ctx, []apiserverv1.Key{key})
}

// newKeyFor is a new key whose name none of keys has.
func newKeyFor(keys []apiserverv1.Key, now time.Time) (apiserverv1.Key, error) {
	key, err := newKey(now)
	if err != nil {
		return key, err
	}
	if slices.ContainsFunc(keys, func(k apiserverv1.Key) bool { return k.Name == key.Name }) {
		return key, fmt.Errorf("a key named %s exists already", key.Name)
	}
	return key, nil
}

// apply writes a configuration with keys and waits until the server has
// loaded it.
func (r Rotation) apply(ctx context.Context, keys []apiserverv1.Key) error {
	if err := write(r.Path, keys); err != nil {
		return err
	}
	hash, err := encryptionconfig.GetEncryptionConfigHash(r.Path)
	if err != nil {
		return err
	}
	return r.Loaded(ctx, hash)
}

// reencrypt writes every Secret not encrypted with the configuration's
// first key anew with it, in etcd, as the server's storage would: the
// same transformer, the same authenticated data (the key), and a write
// only if the Secret did not change since it was read (else it is read
// again). Workers write in parallel. It returns how many Secrets it read.
func (r Rotation) reencrypt(ctx context.Context) (int, error) {
	loaded, err := encryptionconfig.LoadEncryptionConfig(ctx, r.Path, false, "kubeboot secrets-encrypt")
	if err != nil {
		return 0, err
	}
	transformer := encryptionconfig.StaticTransformers(loaded.Transformers).TransformerForResource(secrets)
	resp, err := r.Client.Get(ctx, secretsPrefix(r.Prefix), clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	total := len(resp.Kvs)
	work := make(chan *mvccpb.KeyValue)
	var done atomic.Int64
	g, ctx := errgroup.WithContext(ctx)
	for range reencryptWorkers {
		g.Go(func() error {
			for kv := range work {
				if err := r.rewrite(ctx, transformer, kv); err != nil {
					return fmt.Errorf("re-encrypting %s: %w", kv.Key, err)
				}
				if n := int(done.Add(1)); r.Progress != nil && (n%1000 == 0 || n == total) {
					r.Progress(n, total)
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(work)
		for _, kv := range resp.Kvs {
			select {
			case work <- kv:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	return total, g.Wait()
}

// reencryptWorkers is how many Secrets are rewritten at once.
const reencryptWorkers = 8

// rewrite writes kv's value anew with the transformer's first key if it
// is stored with another; if the Secret changed since kv was read, it is
// read again.
func (r Rotation) rewrite(ctx context.Context, transformer value.Transformer, kv *mvccpb.KeyValue) error {
	key := string(kv.Key)
	for {
		dataCtx := value.DefaultContext(key)
		plain, stale, err := transformer.TransformFromStorage(ctx, kv.Value, dataCtx)
		if err != nil {
			return err
		}
		if !stale {
			return nil
		}
		stored, err := transformer.TransformToStorage(ctx, plain, dataCtx)
		if err != nil {
			return err
		}
		txn, err := r.Client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, string(stored))).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return err
		}
		if txn.Succeeded {
			return nil
		}
		kvs := txn.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return nil // deleted meanwhile
		}
		kv = kvs[0]
	}
}
