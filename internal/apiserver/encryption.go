package apiserver

import (
	"context"
	"fmt"
	"path"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/options/encryptionconfig"
	encryptionconfigcontroller "k8s.io/apiserver/pkg/server/options/encryptionconfig/controller"
	encryptionconfigmetrics "k8s.io/apiserver/pkg/server/options/encryptionconfig/metrics"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/value"
)

// hookEncryptionReload is kube-apiserver's post-start hook that reloads
// --encryption-provider-config when the file changes
// (--encryption-provider-config-automatic-reload).
const hookEncryptionReload = "start-encryption-provider-config-automatic-reload"

// encryptionReloadPeriod is how often the reload controller looks at the
// file: a quarter of a second, where kube-apiserver's looks every minute,
// so that each stage of kubeboot secrets-encrypt (which waits for every
// server's reload) takes seconds, not minutes. Reading and hashing a small file
// four times a second costs nothing measurable.
const encryptionReloadPeriod = 250 * time.Millisecond

// shortenEncryptionReloadPeriod sets the reload period, upstream's package
// variable, once per process and before any reload controller reads it,
// unless it is shorter already (a test's).
var shortenEncryptionReloadPeriod = sync.OnceFunc(func() {
	if encryptionconfigcontroller.EncryptionConfigFileChangePollDuration > encryptionReloadPeriod {
		encryptionconfigcontroller.EncryptionConfigFileChangePollDuration = encryptionReloadPeriod
	}
})

// applyEncryption loads --encryption-provider-config into the
// transformers the storage encrypts and decrypts resources with, as
// kube-apiserver does: its providers' health checks join /healthz and
// /readyz, and with automatic reload a post-start hook watches the file.
// Without a configuration c.transformers stays nil (values are stored as
// they are). The transformers live until the server has drained; close
// ends them sooner, when the server is not built.
func (c *chainConfig) applyEncryption() (close func(), err error) {
	e, gc := c.cfg.Etcd, c.generic
	if e.EncryptionProviderConfigFilepath == "" {
		return func() {}, nil
	}
	serverCtx := wait.ContextForChannel(gc.DrainedNotify())
	ctx, close := context.WithCancel(serverCtx)
	defer func() {
		if err != nil {
			close()
		}
	}()
	loaded, err := encryptionconfig.LoadEncryptionConfig(ctx, e.EncryptionProviderConfigFilepath, e.EncryptionProviderConfigAutomaticReload, gc.APIServerID)
	if err != nil {
		return nil, fmt.Errorf("--encryption-provider-config: %w", err)
	}
	for gr := range loaded.Transformers {
		c.encrypted = append(c.encrypted, gr)
	}
	// As kube-apiserver: the loaded file's hash, which tools compare with
	// the file's (kubeboot secrets-encrypt).
	encryptionconfigmetrics.RecordEncryptionConfigLastConfigInfo(gc.APIServerID, loaded.EncryptionFileContentHash)
	// As kube-apiserver's: on /healthz and /readyz, not /livez (a KMS
	// plugin that is down must not get the server restarted).
	if !e.EncryptionProviderConfigAutomaticReload {
		gc.HealthzChecks = append(gc.HealthzChecks, loaded.HealthChecks...)
		gc.ReadyzChecks = append(gc.ReadyzChecks, loaded.HealthChecks...)
		c.transformers = encryptionconfig.StaticTransformers(loaded.Transformers)
		return close, nil
	}
	if len(loaded.HealthChecks) != 1 {
		return nil, fmt.Errorf("--encryption-provider-config-automatic-reload: want one health check of the providers, got %d", len(loaded.HealthChecks))
	}
	dynamic := encryptionconfig.NewDynamicTransformers(loaded.Transformers, loaded.HealthChecks[0], close, loaded.KMSCloseGracePeriod)
	gc.HealthzChecks = append(gc.HealthzChecks, dynamic)
	gc.ReadyzChecks = append(gc.ReadyzChecks, dynamic)
	shortenEncryptionReloadPeriod()
	err = gc.AddPostStartHook(hookEncryptionReload, func(genericapiserver.PostStartHookContext) error {
		reload := encryptionconfigcontroller.NewDynamicEncryptionConfiguration("encryption-provider-config-automatic-reload-controller",
			e.EncryptionProviderConfigFilepath, dynamic, loaded.EncryptionFileContentHash, gc.APIServerID)
		go reload.Run(serverCtx)
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.transformers = dynamic
	return close, nil
}

// checkDecryptable reads every stored object of the resources the
// encryption configuration names, and of Secrets, and refuses to start if
// one of them does not decrypt: a configuration that lost a key (a
// rotation done wrong) would otherwise serve those objects as errors,
// and the next write of one would replace what could still be recovered
// with the right key.
func checkDecryptable(ctx context.Context, client *clientv3.Client, prefix string, factory serverstorage.StorageFactory,
	transformers value.ResourceTransformers, configured []schema.GroupResource) error {
	if transformers == nil {
		return nil
	}
	resources := append([]schema.GroupResource{{Resource: "secrets"}}, configured...)
	seen := map[schema.GroupResource]bool{}
	for _, gr := range resources {
		if seen[gr] || gr.Group == "*" || gr.Resource == "*" {
			continue
		}
		seen[gr] = true
		keyPrefix := path.Join("/", prefix, factory.ResourcePrefix(gr)) + "/"
		resp, err := client.Get(ctx, keyPrefix, clientv3.WithPrefix())
		if err != nil {
			return fmt.Errorf("--encryption-provider-config: reading %s to check they decrypt: %w", gr, err)
		}
		transformer := transformers.TransformerForResource(gr)
		for _, kv := range resp.Kvs {
			if _, _, err := transformer.TransformFromStorage(ctx, kv.Value, value.DefaultContext(kv.Key)); err != nil {
				return fmt.Errorf("--encryption-provider-config: %s %s does not decrypt with this configuration (was it written with a key the configuration no longer lists?): %w; refusing to start rather than serve it as an error",
					gr, string(kv.Key), err)
			}
		}
	}
	return nil
}
