package clusterjoin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// The cluster's record of its join tokens: a Secret in kube-system, where
// the cluster's bootstrap tokens are too. Every server keeps its token
// files at the record (Record.Sync), so that a token rotated on one
// server is the token of all, and the old one joins nothing.
const (
	// RecordName is the record's name in kube-system.
	RecordName = "kubeboot-join-tokens"
	// RecordType is its type.
	RecordType corev1.SecretType = "kubeboot.io/join-tokens"
	// recordTokenKey holds the server token, recordAgentTokenKey the
	// agent token when there is one.
	recordTokenKey      = "token"
	recordAgentTokenKey = "agent-token"
)

// Record is a server's token files and the cluster's record of them.
type Record struct {
	// Client reaches the cluster.
	Client kubernetes.Interface
	// TokenFile and AgentTokenFile are the server's token files
	// (Server.TokenFile, Server.AgentTokenFile).
	TokenFile, AgentTokenFile string
	// AgentToken is --agent-token, which replaces the record's agent
	// token; nil: the record's is kept.
	AgentToken *Token
}

// Sync makes the record from the files if the cluster has none (its
// first server, or one of a kubeboot before the record) and sets its
// agent token to AgentToken, then writes the files at the record
// whenever it changes, until ctx ends.
func (r Record) Sync(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		if err := r.ensure(ctx); err != nil {
			logger.V(2).Info("The record of the join tokens is not made yet", "err", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	FollowSecret(ctx, r.Client, RecordName, func(record *corev1.Secret) { r.write(logger, record) })
	return nil
}

// FollowSecret calls handle with the Secret kube-system/name as it is
// created and each time it changes, until ctx ends: how every server
// follows one of the cluster's records (the join tokens, a CA rotation).
func FollowSecret(ctx context.Context, client kubernetes.Interface, name string, handle func(*corev1.Secret)) {
	secrets := client.CoreV1().Secrets(metav1.NamespaceSystem)
	follow(ctx, client, name, &corev1.Secret{}, secrets.List, secrets.Watch, handle)
}

// FollowConfigMap is FollowSecret for the ConfigMap kube-system/name (the
// encryption configuration's record, which no Secret can hold).
func FollowConfigMap(ctx context.Context, client kubernetes.Interface, name string, handle func(*corev1.ConfigMap)) {
	configMaps := client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	follow(ctx, client, name, &corev1.ConfigMap{}, configMaps.List, configMaps.Watch, handle)
}

// follow calls handle with the object name (of prototype's type) as list
// and watch see it, as
// it is created and each time it changes, until ctx ends.
func follow[T, L runtime.Object](ctx context.Context, client kubernetes.Interface, name string, prototype T,
	list func(context.Context, metav1.ListOptions) (L, error), watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), handle func(T)) {
	only := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = only
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = only
			return watchFn(ctx, o)
		},
	}
	call := func(obj any) {
		if o, ok := obj.(T); ok {
			handle(o)
		}
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		// The client tells whether it streams lists (a fake does not).
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(lw, client),
		ObjectType:    prototype,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    call,
			UpdateFunc: func(_, obj any) { call(obj) },
		},
	})
	informer.RunWithContext(ctx)
}

// ensure creates the record from the files, or sets its agent token to
// AgentToken.
func (r Record) ensure(ctx context.Context) error {
	secrets := r.Client.CoreV1().Secrets(metav1.NamespaceSystem)
	record, err := secrets.Get(ctx, RecordName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		token, err := ReadToken(r.TokenFile)
		if err != nil {
			return err
		}
		record = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: RecordName, Namespace: metav1.NamespaceSystem},
			Type: RecordType, Data: map[string][]byte{recordTokenKey: []byte(token.String())}}
		if agent, err := ReadToken(r.AgentTokenFile); err == nil {
			record.Data[recordAgentTokenKey] = []byte(agent.String())
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if r.AgentToken != nil {
			record.Data[recordAgentTokenKey] = []byte(r.AgentToken.String())
		}
		_, err = secrets.Create(ctx, record, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return r.ensure(ctx)
		}
		return err
	} else if err != nil {
		return err
	}
	if r.AgentToken == nil || string(record.Data[recordAgentTokenKey]) == r.AgentToken.String() {
		return nil
	}
	if record.Data == nil {
		record.Data = map[string][]byte{}
	}
	record.Data[recordAgentTokenKey] = []byte(r.AgentToken.String())
	_, err = secrets.Update(ctx, record, metav1.UpdateOptions{})
	return err
}

// recordFile is a key of the record and the token file it is written to.
type recordFile struct{ key, path string }

// files are the record's keys and the token files they are written to.
func (r Record) files() []recordFile {
	return []recordFile{{recordTokenKey, r.TokenFile}, {recordAgentTokenKey, r.AgentTokenFile}}
}

// write writes the files at the record.
func (r Record) write(logger klog.Logger, record *corev1.Secret) {
	for _, f := range r.files() {
		data, ok := record.Data[f.key]
		if !ok {
			continue
		}
		token, err := ParseToken(string(data))
		if err != nil {
			logger.Error(err, "The record of the join tokens holds a malformed token", "key", f.key)
			continue
		}
		if current, err := ReadToken(f.path); err == nil && current == token {
			continue
		}
		if err := WriteToken(f.path, token); err != nil {
			logger.Error(err, "Writing the join token the cluster's record holds", "path", f.path)
			continue
		}
		logger.Info("The cluster's join token changed: wrote the new one", "path", f.path)
	}
}

// ErrNoRecord is a rotation on a cluster with no record of its tokens:
// its servers are not running, or run a kubeboot before the record.
var ErrNoRecord = errors.New("the cluster has no record of its join tokens: are its servers running (a kubeboot that keeps the record)?")

// Rotate replaces the server token with one of password newPassword, in
// the record (every server writes it into its token file) and in
// TokenFile. If old is set it must be the current token, as the user
// gave it (the whole token, or its password). Nothing changes if it fails.
func (r Record) Rotate(ctx context.Context, old, newPassword string) (Token, error) {
	current, err := ReadToken(r.TokenFile)
	if err != nil {
		return Token{}, err
	}
	if old != "" && old != current.String() && old != current.Password {
		return Token{}, errors.New("--token is not the cluster's current server token")
	}
	next, err := ParseUserToken(newPassword, ServerUser, current.CAHash)
	if err != nil {
		return Token{}, fmt.Errorf("--new-token: %w", err)
	}
	if next == current {
		return Token{}, errors.New("--new-token is the current token")
	}
	secrets := r.Client.CoreV1().Secrets(metav1.NamespaceSystem)
	record, err := secrets.Get(ctx, RecordName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Token{}, ErrNoRecord
	} else if err != nil {
		return Token{}, fmt.Errorf("the record of the join tokens: %w", err)
	}
	if string(record.Data[recordTokenKey]) != current.String() {
		return Token{}, fmt.Errorf("the cluster's record holds another token than %s: the token was rotated elsewhere and this server has not written it yet; try again", r.TokenFile)
	}
	record.Data[recordTokenKey] = []byte(next.String())
	// The resource version the update carries refuses a rotation made
	// meanwhile elsewhere.
	if _, err := secrets.Update(ctx, record, metav1.UpdateOptions{}); err != nil {
		return Token{}, fmt.Errorf("the record of the join tokens: %w", err)
	}
	if err := WriteToken(r.TokenFile, next); err != nil {
		return Token{}, fmt.Errorf("the cluster's token is rotated, but writing %s failed (the server writes it shortly): %w", r.TokenFile, err)
	}
	return next, nil
}

// Rehash sets the CA hash of the tokens in the record (every server writes
// them into its token files) and in TokenFile and AgentTokenFile to the
// hash of caPEM, the cluster CA's file after a rotate-ca, and returns the
// server token. Nothing changes if it fails.
func (r Record) Rehash(ctx context.Context, caPEM []byte) (Token, error) {
	hash := CAHash(caPEM)
	secrets := r.Client.CoreV1().Secrets(metav1.NamespaceSystem)
	record, err := secrets.Get(ctx, RecordName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// A server that answers no joins keeps no record: its files only.
		record = &corev1.Secret{Data: map[string][]byte{}}
		for _, f := range r.files() {
			if t, err := ReadToken(f.path); err == nil {
				record.Data[f.key] = []byte(t.String())
			} else if !errors.Is(err, os.ErrNotExist) {
				return Token{}, err
			}
		}
	} else if err != nil {
		return Token{}, fmt.Errorf("the record of the join tokens: %w", err)
	}
	var server Token
	rehashed := map[string]Token{}
	for _, f := range r.files() {
		data, ok := record.Data[f.key]
		if !ok {
			continue
		}
		t, err := ParseToken(string(data))
		if err != nil {
			return Token{}, fmt.Errorf("the record of the join tokens, %s: %w", f.key, err)
		}
		t.CAHash = hash
		record.Data[f.key] = []byte(t.String())
		rehashed[f.path] = t
		if f.key == recordTokenKey {
			server = t
		}
	}
	if record.Name != "" {
		if _, err := secrets.Update(ctx, record, metav1.UpdateOptions{}); err != nil {
			return Token{}, fmt.Errorf("the record of the join tokens: %w", err)
		}
	}
	for path, t := range rehashed {
		if err := WriteToken(path, t); err != nil {
			return Token{}, fmt.Errorf("the cluster's tokens are updated, but writing %s failed (the server writes it shortly): %w", path, err)
		}
	}
	return server, nil
}
