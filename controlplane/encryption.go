package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/platform/secretsencryption"
)

// --secrets-encryption on a cluster of servers: every server keeps its
// configuration file at the cluster's record of it, which
// `kubeboot secrets-encrypt` changes on any server.

// encryptionRetry is how long a server waits before following the record
// again after a failure (its token file not rotated yet, say).
const encryptionRetry = 5 * time.Second

// takeEncryption is the etcd client once the server has taken the
// cluster's encryption configuration, if it follows one: a server that was
// down while the configuration changed loads the keys its Secrets are
// stored with, before it reads any.
func (s *Server) takeEncryption(ctx context.Context, etcdClient func() (*clientv3.Client, error)) func() (*clientv3.Client, error) {
	if !s.cfg.secretsEncryptionConfig {
		return etcdClient
	}
	return func() (*clientv3.Client, error) {
		client, err := etcdClient()
		if err != nil {
			return nil, err
		}
		path := s.cfg.Etcd.EncryptionProviderConfigFilepath
		took, err := secretsencryption.Take(ctx, client, s.cfg.Etcd.StorageConfig.Prefix, TokenFileIn(s.cfg.DataDir), path)
		if err != nil {
			return nil, fmt.Errorf("--secrets-encryption: %w", err)
		}
		if took {
			klog.FromContext(ctx).Info("Took the cluster's encryption configuration, which changed while this server was down", "config", path)
		}
		return client, nil
	}
}

// followSecretsEncryption keeps the configuration file at the cluster's
// record from the time the apiserver is ready but for this sync; /readyz
// is 200 once the first sync is done (encryptionSyncedCheck), or
// encryptionSyncBound after it began.
func (s *Server) followSecretsEncryption(ctx context.Context) {
	if s.encryptionSynced == nil {
		return
	}
	var once sync.Once
	synced := func() { once.Do(func() { close(s.encryptionSynced) }) }
	if err := s.api.WaitReadyExcept(ctx, encryptionSyncedCheckName); err != nil {
		return
	}
	client, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Following the cluster's encryption configuration")
		synced()
		return
	}
	bound := time.AfterFunc(encryptionSyncBound, func() {
		klog.FromContext(ctx).Info("The server has not recorded its encryption configuration yet: ready without it", "after", encryptionSyncBound)
		synced()
	})
	defer bound.Stop()
	secretsencryption.Follower{Client: client, Name: s.serverName(), Path: s.cfg.Etcd.EncryptionProviderConfigFilepath,
		TokenFile: TokenFileIn(s.cfg.DataDir), Provider: s.cfg.SecretsEncryptionProvider,
		Address: s.cfg.apiserver.AdvertiseAddress.String(), Retry: encryptionRetry}.Run(ctx, func() {
		bound.Stop()
		synced()
	})
}

// encryptionSyncBound bounds how long a server's readiness waits for its
// first sync with the encryption record, which fails on its own only
// through a hung request.
const encryptionSyncBound = 10 * time.Second

// encryptionSyncedCheckName is the readiness check of the first sync.
const encryptionSyncedCheckName = "secrets-encryption-synced"

// encryptionSyncedCheck fails until the server has recorded the
// encryption configuration it loaded: a stage run once a server is ready
// (its /readyz, which clients and tests wait for) sees its provider.
func (s *Server) encryptionSyncedCheck() healthz.HealthChecker {
	return healthz.NamedCheck(encryptionSyncedCheckName, func(*http.Request) error {
		select {
		case <-s.encryptionSynced:
			return nil
		default:
			return errors.New("the server has not recorded the cluster's encryption configuration it loaded yet")
		}
	})
}

// serverName names the server among the cluster's: its etcd member's
// name, which `kubeboot etcd member list` shows, or, on an external etcd,
// its host's.
func (s *Server) serverName() string {
	if s.cfg.embeddedEtcd() {
		name, _ := s.etcdConfig().Member()
		return name
	}
	host, _ := os.Hostname()
	return host
}
