package secretsencryption

import (
	"bytes"
	"cmp"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/server/options/encryptionconfig"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/platform/clusterjoin"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// The cluster's record of its encryption configuration: a ConfigMap in
// kube-system, not a Secret, since it must be read by a server that does
// not have the keys Secrets are stored with yet. The configuration in it
// is sealed with the server token's password, which no etcd data holds in
// the clear (k3s seals its bootstrap data the same way). Every server
// writes its file at the record (Follower), and records there which
// configuration it has loaded; a server that starts takes the record
// before it loads its file (Take).
const (
	// RecordName is the record's name in kube-system.
	RecordName = "kubeboot-secrets-encryption"
	// recordConfigKey holds the sealed configuration, recordHashKey its
	// content hash, recordStageKey the stage of the cycle it is at.
	recordConfigKey = "config"
	recordHashKey   = "hash"
	recordStageKey  = "stage"
	// serverKeyPrefix begins the key of each server's state.
	serverKeyPrefix = "server."
)

// ServerState is what a server records of itself: the configuration it
// has loaded (the record's hash and stage when it loaded it) and its
// --secrets-encryption-provider, which new keys take when the cycle runs
// on it.
type ServerState struct {
	Hash     string `json:"hash"`
	Stage    string `json:"stage"`
	Provider string `json:"provider"`
	// Address is the server's advertise address: it is running while
	// the kubernetes Service's endpoints list it.
	Address string `json:"address"`
}

// record is the record as read: its object and sealed configuration.
type record struct {
	*corev1.ConfigMap
}

func (r record) hash() string  { return r.Data[recordHashKey] }
func (r record) stage() string { return r.Data[recordStageKey] }

// servers are the states the servers recorded, by name.
func (r record) servers() map[string]ServerState {
	out := map[string]ServerState{}
	for k, v := range r.Data {
		name, ok := strings.CutPrefix(k, serverKeyPrefix)
		if !ok {
			continue
		}
		var s ServerState
		if json.Unmarshal([]byte(v), &s) == nil {
			out[name] = s
		}
	}
	return out
}

// open unseals the record's configuration with the token file's password.
func (r record) open(tokenFile string) ([]byte, error) {
	token, err := clusterjoin.ReadToken(tokenFile)
	if err != nil {
		return nil, err
	}
	return r.openWith(token.Password, tokenFile)
}

// openWith unseals the record's configuration with password, the token's
// in tokenFile.
func (r record) openWith(password, tokenFile string) ([]byte, error) {
	data, err := unseal(password, r.BinaryData[recordConfigKey])
	if err != nil {
		return nil, fmt.Errorf("the cluster's encryption configuration (ConfigMap kube-system/%s) does not open with the server token in %s: %w; if the token was rotated while this server was down, write the cluster's current token there",
			RecordName, tokenFile, err)
	}
	if contentHash(data) != r.hash() {
		return nil, fmt.Errorf("the cluster's encryption configuration (ConfigMap kube-system/%s) does not have the hash it records", RecordName)
	}
	return data, nil
}

// setConfig seals data with password into the record, at stage.
func (r record) setConfig(password string, data []byte, stage string) error {
	sealed, err := seal(password, data)
	if err != nil {
		return err
	}
	if r.BinaryData == nil {
		r.BinaryData = map[string][]byte{}
	}
	if r.Data == nil {
		r.Data = map[string]string{}
	}
	r.BinaryData[recordConfigKey] = sealed
	r.Data[recordHashKey] = contentHash(data)
	r.Data[recordStageKey] = stage
	return nil
}

// sealIterations is PBKDF2's work for the sealing key: a user's token may
// be a password of 16 characters, not a random key.
const sealIterations = 100_000

// sealVersion begins every sealed value, for a later format to tell it
// apart.
const sealVersion = "kubeboot-sealed-v1:"

// seal encrypts plain with AES-256-GCM under a key derived from password
// with a random salt: version, salt (16 bytes), nonce, ciphertext.
func seal(password string, plain []byte) ([]byte, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	aead, err := sealingAEAD(password, salt)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := append(append(append([]byte(sealVersion), salt...), nonce...), aead.Seal(nil, nonce, plain, []byte(sealVersion))...)
	return out, nil
}

// unseal reverses seal.
func unseal(password string, sealed []byte) ([]byte, error) {
	rest, ok := bytes.CutPrefix(sealed, []byte(sealVersion))
	if !ok || len(rest) < 16 {
		return nil, errors.New("not a sealed value")
	}
	aead, err := sealingAEAD(password, rest[:16])
	if err != nil {
		return nil, err
	}
	rest = rest[16:]
	if len(rest) < aead.NonceSize() {
		return nil, errors.New("not a sealed value")
	}
	plain, err := aead.Open(nil, rest[:aead.NonceSize()], rest[aead.NonceSize():], []byte(sealVersion))
	if err != nil {
		return nil, errors.New("wrong token or damaged value")
	}
	return plain, nil
}

func sealingAEAD(password string, salt []byte) (cipher.AEAD, error) {
	key, err := pbkdf2.Key(sha256.New, password, salt, sealIterations, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// getRecord reads the record; nil if there is none.
func getRecord(ctx context.Context, client kubernetes.Interface) (*record, error) {
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, RecordName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("the cluster's encryption record (ConfigMap kube-system/%s): %w", RecordName, err)
	}
	return &record{cm}, nil
}

// writeFile writes data to the configuration file at path, unless it
// holds it already, and reports whether it wrote.
func writeFile(path string, data []byte) (bool, error) {
	if current, err := os.ReadFile(path); err == nil && bytes.Equal(current, data) {
		return false, nil
	}
	return true, pki.WriteFile(path, data, 0o600)
}

// Take writes the configuration the cluster's record holds to path, if
// the file holds another, before the server loads it: a server that was
// down while the cycle went on starts with the keys its Secrets are stored
// with. The record is read from etcd under prefix (the API server is not
// serving yet), unsealed with the password of the token in tokenFile.
// Without a record (a cluster whose cycle has not run) nothing changes.
func Take(ctx context.Context, client *clientv3.Client, prefix, tokenFile, path string) (bool, error) {
	resp, err := client.Get(ctx, recordKey(prefix))
	if err != nil {
		return false, fmt.Errorf("reading the cluster's encryption record: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return false, nil
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(resp.Kvs[0].Value, nil, &corev1.ConfigMap{})
	if err != nil {
		return false, fmt.Errorf("reading the cluster's encryption record: %w", err)
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return false, fmt.Errorf("reading the cluster's encryption record: a %T", obj)
	}
	r := record{cm}
	if current, err := os.ReadFile(path); err == nil && contentHash(current) == r.hash() {
		return false, nil
	}
	data, err := r.open(tokenFile)
	if err != nil {
		return false, err
	}
	return writeFile(path, data)
}

// recordKey is where the record is stored in etcd under prefix.
func recordKey(prefix string) string {
	return path.Join("/", prefix, "configmaps", metav1.NamespaceSystem, RecordName)
}

// Follower keeps a running server's configuration file at the cluster's
// record and records, in it, what the server has loaded.
type Follower struct {
	// Client reaches the server.
	Client kubernetes.Interface
	// Name is the server's in the record (its etcd member's).
	Name string
	// Path is its configuration file, TokenFile its server token's.
	Path, TokenFile string
	// Provider is its --secrets-encryption-provider, Address its
	// advertise address.
	Provider, Address string
	// Retry is how long a failed sync waits before the next.
	Retry time.Duration
}

// Run makes the record from the file if the cluster has none, then
// follows it until ctx ends. synced is called once, after the first sync
// (done or failed): a server is ready once it has recorded what it loaded,
// so that a stage run right after its start sees its provider.
func (f Follower) Run(ctx context.Context, synced func()) {
	logger := klog.FromContext(ctx).WithValues("record", "kube-system/"+RecordName)
	changed := make(chan struct{}, 1)
	go clusterjoin.FollowConfigMap(ctx, f.Client, RecordName, func(*corev1.ConfigMap) {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	// The token password the record last opened with: after a rotation
	// of the token, the server reseals the record with the new one.
	var known string
	for {
		var retry <-chan time.Time
		if err := f.sync(ctx, logger, &known); err != nil && ctx.Err() == nil {
			logger.Info("Following the cluster's encryption configuration: will try again", "err", err, "in", f.Retry)
			retry = time.After(f.Retry)
		}
		if synced != nil {
			synced()
			synced = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-retry:
		}
	}
}

// sync writes the file at the record, waits until the server has loaded
// it, and records that it has. known is the token password the record
// last opened with.
func (f Follower) sync(ctx context.Context, logger klog.Logger, known *string) error {
	r, err := getRecord(ctx, f.Client)
	if err != nil {
		return err
	}
	if r == nil {
		if err := f.create(ctx); err != nil {
			return err
		}
		if r, err = getRecord(ctx, f.Client); err != nil || r == nil {
			return cmp.Or(err, ErrNoRecord)
		}
	}
	token, err := clusterjoin.ReadToken(f.TokenFile)
	if err != nil {
		return err
	}
	// The record is unsealed (PBKDF2, tens of milliseconds) only when the
	// file lacks its configuration or the token is not the one it last
	// opened with: not at every event (each server's state is one).
	current, err := os.ReadFile(f.Path)
	stale := err != nil || contentHash(current) != r.hash()
	if stale || token.Password != *known {
		data, err := r.openWith(token.Password, f.TokenFile)
		switch {
		case err != nil && *known != "" && *known != token.Password:
			// The token was rotated (the cluster's record of it, which
			// this server follows, changed its file) and the record not
			// resealed yet: it is, with the password it opened with
			// before.
			if err := Reseal(ctx, f.Client, *known, token.Password); err != nil {
				return err
			}
			logger.Info("The server token was rotated: resealed the cluster's encryption configuration with it")
			return nil // the update's event follows
		case err != nil:
			return err
		}
		*known = token.Password
		if stale {
			if _, err := writeFile(f.Path, data); err != nil {
				return err
			}
			logger.Info("The cluster's encryption configuration changed: wrote it", "stage", r.stage(), "path", f.Path)
		}
	}
	hash, err := encryptionconfig.GetEncryptionConfigHash(f.Path)
	if err != nil {
		return err
	}
	if err := WaitLoaded(ctx, f.Client, hash); err != nil {
		return err
	}
	state, err := json.Marshal(ServerState{Hash: r.hash(), Stage: r.stage(), Provider: f.Provider, Address: f.Address})
	if err != nil {
		return err
	}
	key := serverKeyPrefix + f.Name
	if r.Data[key] == string(state) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"data": map[string]string{key: string(state)}})
	if err != nil {
		return err
	}
	_, err = f.Client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Patch(ctx, RecordName, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// create makes the record from the file, at the stage start.
func (f Follower) create(ctx context.Context) error {
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return err
	}
	if _, err := ParseConfig(data); err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	token, err := clusterjoin.ReadToken(f.TokenFile)
	if err != nil {
		return err
	}
	r := record{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: RecordName, Namespace: metav1.NamespaceSystem}}}
	if err := r.setConfig(token.Password, data, StageStart); err != nil {
		return err
	}
	_, err = f.Client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Create(ctx, r.ConfigMap, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil // another server's
	}
	return err
}

// Reseal seals the record's configuration with newPassword instead of
// oldPassword: a rotation of the server token (kubeboot token rotate).
// Without a record nothing changes.
func Reseal(ctx context.Context, client kubernetes.Interface, oldPassword, newPassword string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r, err := getRecord(ctx, client)
		if err != nil || r == nil {
			return err
		}
		data, err := unseal(oldPassword, r.BinaryData[recordConfigKey])
		if err != nil {
			if _, err := unseal(newPassword, r.BinaryData[recordConfigKey]); err == nil {
				return nil // resealed already
			}
			return fmt.Errorf("the cluster's encryption record does not open with the old token: %w", err)
		}
		if err := r.setConfig(newPassword, data, r.stage()); err != nil {
			return err
		}
		_, err = client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Update(ctx, r.ConfigMap, metav1.UpdateOptions{})
		return err
	})
}

// loadedMetric is kube-apiserver's gauge of the encryption configuration
// it has loaded, by its content hash.
const loadedMetric = "apiserver_encryption_config_controller_last_config_info{"

// WaitLoaded waits, up to a minute, until the server reports that the
// encryption configuration it uses has the file content hash (as
// encryptionconfig.GetEncryptionConfigHash gives it).
func WaitLoaded(ctx context.Context, client kubernetes.Interface, hash string) error {
	want := fmt.Sprintf(`hash=%q`, hash)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		metrics, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return false, nil
		}
		for line := range strings.SplitSeq(string(metrics), "\n") {
			if strings.HasPrefix(line, loadedMetric) && strings.Contains(line, want) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the server did not load the encryption configuration within a minute: %w", err)
	}
	return nil
}
