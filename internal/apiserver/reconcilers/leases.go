package reconcilers

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
)

// leases keeps this apiserver's key <prefix>/masterleases/<ip> alive on an
// etcd lease and lists the keys of every live apiserver. The value is an
// Endpoints object, as kube-apiserver writes there, so apiservers of both
// kinds can share one etcd. A lease is renewed by keep-alive messages,
// which etcd's leader answers without a raft write; etcd deletes the key
// once the lease expires.
type leases struct {
	client  *clientv3.Client
	prefix  string // ".../masterleases/"
	ttl     time.Duration
	encoder runtime.Encoder

	mu       sync.Mutex
	id       clientv3.LeaseID // 0 when not holding
	held     netip.Addr
	kaCancel context.CancelFunc
}

func newLeases(client *clientv3.Client, storagePrefix string, ttl time.Duration, encoder runtime.Encoder) *leases {
	return &leases{
		client:  client,
		prefix:  strings.TrimSuffix(storagePrefix, "/") + "/masterleases/",
		ttl:     ttl,
		encoder: encoder,
	}
}

func (l *leases) key(ip netip.Addr) string { return l.prefix + ip.String() }

// hold makes sure ip's key exists on a live lease of ours.
func (l *leases) hold(ctx context.Context, ip netip.Addr) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.id != 0 && l.held == ip {
		return nil
	}
	l.dropLocked()
	secs := int64((l.ttl + time.Second - 1) / time.Second)
	grant, err := l.client.Grant(ctx, secs)
	if err != nil {
		return fmt.Errorf("granting the endpoint lease: %w", err)
	}
	value, err := l.value(ip)
	if err != nil {
		return err
	}
	if _, err := l.client.Put(ctx, l.key(ip), string(value), clientv3.WithLease(grant.ID)); err != nil {
		_, _ = l.client.Revoke(context.WithoutCancel(ctx), grant.ID)
		return fmt.Errorf("storing the endpoint lease of %s: %w", ip, err)
	}
	kaCtx, cancel := context.WithCancel(context.Background())
	ch, err := l.client.KeepAlive(kaCtx, grant.ID)
	if err != nil {
		cancel()
		return fmt.Errorf("keeping the endpoint lease alive: %w", err)
	}
	l.id, l.held, l.kaCancel = grant.ID, ip, cancel
	go l.drain(ch, grant.ID)
	return nil
}

// rewrite puts ip's key again on the lease we hold for it.
func (l *leases) rewrite(ctx context.Context, ip netip.Addr) error {
	l.mu.Lock()
	id := l.id
	held := l.held
	l.mu.Unlock()
	if id == 0 || held != ip {
		return l.hold(ctx, ip)
	}
	value, err := l.value(ip)
	if err != nil {
		return err
	}
	if _, err := l.client.Put(ctx, l.key(ip), string(value), clientv3.WithLease(id)); err != nil {
		return fmt.Errorf("storing the endpoint lease of %s: %w", ip, err)
	}
	return nil
}

// drain consumes keep-alive answers; when they stop (the lease expired, for
// example after etcd was unreachable for longer than the TTL), the next
// hold grants a new lease.
func (l *leases) drain(ch <-chan *clientv3.LeaseKeepAliveResponse, id clientv3.LeaseID) {
	for range ch {
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.id == id {
		klog.Background().V(2).Info("Endpoint lease lost; it will be granted again", "lease", id)
		l.id = 0
	}
}

func (l *leases) value(ip netip.Addr) ([]byte, error) {
	e := &corev1.Endpoints{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Endpoints"},
		ObjectMeta: metav1.ObjectMeta{Name: ip.String()},
		Subsets:    []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: ip.String()}}}},
	}
	var b strings.Builder
	if err := l.encoder.Encode(e, &b); err != nil {
		return nil, fmt.Errorf("encoding the endpoint lease: %w", err)
	}
	return []byte(b.String()), nil
}

// list returns the addresses of every live apiserver.
func (l *leases) list(ctx context.Context) ([]netip.Addr, error) {
	resp, err := l.client.Get(ctx, l.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("listing endpoint leases: %w", err)
	}
	var out []netip.Addr
	for _, kv := range resp.Kvs {
		if ip, err := netip.ParseAddr(strings.TrimPrefix(string(kv.Key), l.prefix)); err == nil {
			out = append(out, ip)
		}
	}
	return out, nil
}

// release deletes ip's key: by revoking our lease when we hold it (which
// also stops the keep-alives), else directly (a key left by a crash).
func (l *leases) release(ctx context.Context, ip netip.Addr) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.id != 0 && l.held == ip {
		id := l.id
		l.dropLocked()
		if _, err := l.client.Revoke(ctx, id); err != nil {
			return fmt.Errorf("revoking the endpoint lease: %w", err)
		}
		return nil
	}
	if _, err := l.client.Delete(ctx, l.key(ip)); err != nil {
		return fmt.Errorf("deleting the endpoint lease of %s: %w", ip, err)
	}
	return nil
}

// dropLocked stops keeping the current lease alive (it then expires).
func (l *leases) dropLocked() {
	if l.kaCancel != nil {
		l.kaCancel()
	}
	l.id, l.held, l.kaCancel = 0, netip.Addr{}, nil
}

// watch signals on changed whenever a lease key is written or deleted,
// until ctx ends.
func (l *leases) watch(ctx context.Context, changed chan<- struct{}) {
	for ctx.Err() == nil {
		wch := l.client.Watch(clientv3.WithRequireLeader(ctx), l.prefix, clientv3.WithPrefix())
		for resp := range wch {
			if resp.Err() != nil {
				break
			}
			if len(resp.Events) > 0 {
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
