package etcdstore

import (
	"context"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxOpsPerTxn stays under etcd's default --max-txn-ops (128), which an
// external cluster may keep.
const maxOpsPerTxn = 100

// Checkpoint is every object stored under a key prefix at one revision,
// held in memory so Restore can bring the keyspace back to it: a test
// harness's reset between tests. It does not rely on etcd's history, which
// the apiserver compacts every few minutes.
type Checkpoint struct {
	prefix string
	keep   []string
	kvs    map[string]stored
}

// stored is one key's value as the checkpoint holds it.
type stored struct {
	value       []byte
	modRevision int64
	leased      bool
}

// NewCheckpoint reads every key under prefix. Keys under any of keep's
// prefixes are never touched by Restore: the control plane's own moving
// state (heartbeats, leader leases), which a reset must not turn back.
func NewCheckpoint(ctx context.Context, cli *clientv3.Client, prefix string, keep ...string) (*Checkpoint, error) {
	resp, err := cli.Get(ctx, withSlash(prefix), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("reading %s for a checkpoint: %w", prefix, err)
	}
	c := &Checkpoint{prefix: withSlash(prefix), keep: keep, kvs: make(map[string]stored, len(resp.Kvs))}
	for _, kv := range resp.Kvs {
		if !c.kept(kv) {
			c.kvs[string(kv.Key)] = stored{value: kv.Value, modRevision: kv.ModRevision, leased: kv.Lease != 0}
		}
	}
	return c, nil
}

// Len is the number of objects the checkpoint restores.
func (c *Checkpoint) Len() int { return len(c.kvs) }

// Restore deletes every key created since the checkpoint and writes back
// every key changed or deleted since, in transactions of at most
// maxOpsPerTxn operations; the apiserver's watch cache, and every watcher,
// sees the deletions and updates as events. A key written with an etcd
// lease (an Event with its TTL) is not written back: its lease may be gone.
// It returns how many keys it deleted and wrote. Restore is not safe for
// concurrent use.
func (c *Checkpoint) Restore(ctx context.Context, cli *clientv3.Client) (deleted, written int, err error) {
	resp, err := cli.Get(ctx, c.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, 0, fmt.Errorf("reading %s to restore a checkpoint: %w", c.prefix, err)
	}
	// puts[i] is the key ops[i] writes back, "" for a delete.
	var ops []clientv3.Op
	var puts []string
	seen := make(map[string]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if c.kept(kv) {
			continue
		}
		key := string(kv.Key)
		seen[key] = true
		was, ok := c.kvs[key]
		switch {
		case !ok:
			ops, puts = append(ops, clientv3.OpDelete(key)), append(puts, "")
			deleted++
		case was.modRevision != kv.ModRevision && !was.leased:
			ops, puts = append(ops, clientv3.OpPut(key, string(was.value))), append(puts, key)
			written++
		}
	}
	for key, was := range c.kvs {
		if !seen[key] && !was.leased {
			ops, puts = append(ops, clientv3.OpPut(key, string(was.value))), append(puts, key)
			written++
		}
	}
	for len(ops) > 0 {
		n := min(len(ops), maxOpsPerTxn)
		resp, err := cli.Txn(ctx).Then(ops[:n]...).Commit()
		if err != nil {
			return 0, 0, fmt.Errorf("restoring a checkpoint of %s: %w", c.prefix, err)
		}
		// What was written back is as the checkpoint had it, at this
		// revision: the next Restore leaves it alone unless it changes.
		for _, key := range puts[:n] {
			if key != "" {
				kv := c.kvs[key]
				kv.modRevision = resp.Header.Revision
				c.kvs[key] = kv
			}
		}
		ops, puts = ops[n:], puts[n:]
	}
	return deleted, written, nil
}

func (c *Checkpoint) kept(kv *mvccpb.KeyValue) bool {
	key := string(kv.Key)
	for _, p := range c.keep {
		if strings.HasPrefix(key, c.prefix+strings.TrimPrefix(p, "/")) {
			return true
		}
	}
	return false
}

func withSlash(prefix string) string {
	if strings.HasSuffix(prefix, "/") {
		return prefix
	}
	return prefix + "/"
}
