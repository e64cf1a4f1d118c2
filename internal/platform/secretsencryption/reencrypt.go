package secretsencryption

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
	"k8s.io/apiserver/pkg/server/options/encryptionconfig"
	"k8s.io/apiserver/pkg/storage/value"
)

// reencryptWorkers is how many Secrets are rewritten at once.
const reencryptWorkers = 8

// reencrypt writes every Secret under prefix in etcd that the
// configuration at path's writing key did not store anew with it, as the
// server's storage would: the same transformer, the same authenticated
// data (the key), and a write only if the Secret did not change since it
// was read (else it is read again). Workers write in parallel; progress,
// if set, is told every 1,000 Secrets. It returns how many Secrets it
// read.
func reencrypt(ctx context.Context, client *clientv3.Client, prefix, path string, progress func(done, total int)) (int, error) {
	loaded, err := encryptionconfig.LoadEncryptionConfig(ctx, path, false, "kubeboot secrets-encrypt")
	if err != nil {
		return 0, err
	}
	transformer := encryptionconfig.StaticTransformers(loaded.Transformers).TransformerForResource(secrets)
	resp, err := client.Get(ctx, secretsPrefix(prefix), clientv3.WithPrefix())
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
				if err := rewrite(ctx, client, transformer, kv); err != nil {
					return fmt.Errorf("re-encrypting %s: %w", kv.Key, err)
				}
				if n := int(done.Add(1)); progress != nil && (n%1000 == 0 || n == total) {
					progress(n, total)
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

// rewrite writes kv's value anew with the transformer's writing key if it
// is stored with another; if the Secret changed since kv was read, it is
// read again.
func rewrite(ctx context.Context, client *clientv3.Client, transformer value.Transformer, kv *mvccpb.KeyValue) error {
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
		txn, err := client.Txn(ctx).
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
