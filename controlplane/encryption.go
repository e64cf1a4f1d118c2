package controlplane

import (
	"context"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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
// record from the time the apiserver is ready; the server is ready once
// the first sync is done (watchReady).
func (s *Server) followSecretsEncryption(ctx context.Context) {
	if s.encryptionSynced == nil {
		return
	}
	select {
	case <-s.api.Ready():
	case <-ctx.Done():
		return
	}
	client, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Following the cluster's encryption configuration")
		close(s.encryptionSynced)
		return
	}
	secretsencryption.Follower{Client: client, Name: s.serverName(), Path: s.cfg.Etcd.EncryptionProviderConfigFilepath,
		TokenFile: TokenFileIn(s.cfg.DataDir), Provider: s.cfg.SecretsEncryptionProvider,
		Address: s.cfg.apiserver.AdvertiseAddress.String(), Retry: encryptionRetry}.Run(ctx, func() { close(s.encryptionSynced) })
}

// encryptionSyncBound bounds how long a server's readiness waits for its
// first sync with the encryption record, which fails on its own only
// through a hung request.
const encryptionSyncBound = 10 * time.Second

// waitEncryptionSynced waits until the server has recorded the
// encryption configuration it loaded, if it follows one.
func (s *Server) waitEncryptionSynced(ctx context.Context) {
	if s.encryptionSynced == nil {
		return
	}
	select {
	case <-s.encryptionSynced:
	case <-time.After(encryptionSyncBound):
		klog.FromContext(ctx).Info("The server has not recorded its encryption configuration yet: ready without it", "after", encryptionSyncBound)
	case <-ctx.Done():
	}
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
