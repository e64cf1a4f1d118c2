package reconcilers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubeboot/kubeboot/internal/apiserver/reconcilers"
)

// codec encodes the lease values as core/v1 Endpoints, as the server's
// storage codec does.
var codec = scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion)

// prefixFor is a storage prefix of the test's own, so that lease keys of
// one test never show up in another.
func prefixFor(t *testing.T) string {
	return "/kubeboot-test/" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
}

func newLease(t *testing.T, prefix string, ttl time.Duration) reconcilers.EndpointReconciler {
	t.Helper()
	r := reconcilers.NewLease(client, etcd, prefix, ttl, codec)
	t.Cleanup(r.Destroy)
	return r
}

// putLeases stores keys for ips under prefix on one etcd lease of ttl
// seconds, which the test revokes at its end; it returns the lease.
func putLeases(t *testing.T, prefix string, ttlSeconds int64, ips ...string) clientv3.LeaseID {
	t.Helper()
	ctx := ctxFor(t)
	grant, err := etcd.Grant(ctx, ttlSeconds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = etcd.Revoke(context.Background(), grant.ID) })
	for _, ip := range ips {
		if _, err := etcd.Put(ctx, prefix+"/masterleases/"+ip, "", clientv3.WithLease(grant.ID)); err != nil {
			t.Fatal(err)
		}
	}
	return grant.ID
}

func leaseKeys(t *testing.T, prefix string) []string {
	t.Helper()
	resp, err := etcd.Get(ctxFor(t), prefix+"/masterleases/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, strings.TrimPrefix(string(kv.Key), prefix+"/masterleases/"))
	}
	return keys
}

// The cases of kube-apiserver's TestLeaseEndpointReconciler, against a real
// server and etcd: the endpoints become exactly the live lease keys (ours
// included), with our ports.
func TestLeaseReconcileEndpoints(t *testing.T) {
	twoPorts := []corev1.EndpointPort{
		{Name: "https", Port: 6443, Protocol: corev1.ProtocolTCP},
		{Name: "bar", Port: 1000, Protocol: corev1.ProtocolTCP},
	}
	threePorts := append(twoPorts[:2:2], corev1.EndpointPort{Name: "baz", Port: 1010, Protocol: corev1.ProtocolTCP})
	tests := []struct {
		name           string
		own            string
		others         []string // live lease keys of other apiservers
		initial        *corev1.Endpoints
		ports          []corev1.EndpointPort
		reconcilePorts bool
		wantIPs        []string
		wantPorts      []corev1.EndpointPort
		wantUnchanged  bool
	}{
		{name: "no endpoints", own: ipA, reconcilePorts: true, wantIPs: []string{ipA}},
		{
			name: "own IP present", own: ipA, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA)),
			wantIPs: []string{ipA}, wantUnchanged: true,
		},
		{
			name: "others live, all present", own: ipA, others: []string{ipB, ipC}, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA, ipB, ipC)),
			wantIPs: []string{ipA, ipB, ipC}, wantUnchanged: true,
		},
		{
			name: "extra IP without a lease", own: ipA, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA, ipB)),
			wantIPs: []string{ipA},
		},
		{
			name: "extra IPs, some live", own: ipA, others: []string{ipC, ipD, ipE}, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA, ipB, ipC, ipD, ipE)),
			wantIPs: []string{ipA, ipC, ipD, ipE},
		},
		{
			name: "own IP missing", own: ipC, others: []string{ipB}, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipB)),
			wantIPs: []string{ipB, ipC},
		},
		{
			name: "live apiserver missing", own: ipA, others: []string{ipB}, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA)),
			wantIPs: []string{ipA, ipB},
		},
		{
			name: "wrong IP", own: ipA, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipB)),
			wantIPs: []string{ipA},
		},
		{
			name: "wrong port", own: ipA, reconcilePorts: true,
			initial: endpoints(skipMirror, subset([]corev1.EndpointPort{{Name: "https", Port: 9090, Protocol: corev1.ProtocolTCP}}, ipA)),
			wantIPs: []string{ipA},
		},
		{
			name: "wrong protocol", own: ipA, reconcilePorts: true,
			initial: endpoints(skipMirror, subset([]corev1.EndpointPort{{Name: "https", Port: 6443, Protocol: corev1.ProtocolUDP}}, ipA)),
			wantIPs: []string{ipA},
		},
		{
			name: "wrong port name", own: ipA, reconcilePorts: true,
			initial: endpoints(skipMirror, subset([]corev1.EndpointPort{{Name: "foo", Port: 6443, Protocol: corev1.ProtocolTCP}}, ipA)),
			wantIPs: []string{ipA},
		},
		{
			name: "missing skip-mirror label added", own: ipA, reconcilePorts: true,
			initial: endpoints(nil, subset(httpsPorts, ipA)),
			wantIPs: []string{ipA},
		},
		{
			name: "extra service ports satisfy", own: ipA, reconcilePorts: true, ports: threePorts,
			initial: endpoints(skipMirror, subset(threePorts, ipA)),
			wantIPs: []string{ipA}, wantUnchanged: true,
		},
		{
			name: "extra service ports, one missing", own: ipA, reconcilePorts: true, ports: twoPorts,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA)),
			wantIPs: []string{ipA},
		},
		{
			name: "several subsets rewritten to one", own: ipA, others: []string{ipC}, reconcilePorts: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipB), subset([]corev1.EndpointPort{{Name: "https", Port: 9090, Protocol: corev1.ProtocolTCP}}, ipA, ipC)),
			wantIPs: []string{ipA, ipC},
		},
		{
			name: "missing port not added when reconcilePorts=false", own: ipA, ports: twoPorts,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA)),
			wantIPs: []string{ipA}, wantPorts: httpsPorts, wantUnchanged: true,
		},
		{
			name: "wrong port kept when reconcilePorts=false", own: ipA,
			initial:   endpoints(skipMirror, subset([]corev1.EndpointPort{{Name: "https", Port: 9090, Protocol: corev1.ProtocolTCP}}, ipA)),
			wantIPs:   []string{ipA},
			wantPorts: []corev1.EndpointPort{{Name: "https", Port: 9090, Protocol: corev1.ProtocolTCP}}, wantUnchanged: true,
		},
		{
			name: "wrong IP and ports, reconcilePorts=false: IP fixed, ports kept", own: ipA, ports: twoPorts,
			initial: endpoints(skipMirror, subset(httpsPorts, ipB)),
			wantIPs: []string{ipA}, wantPorts: httpsPorts,
		},
		{name: "no endpoints, reconcilePorts=false", own: ipA, wantIPs: []string{ipA}},
		{name: "IPv6", own: ip6, reconcilePorts: true, initial: endpoints(skipMirror, subset(httpsPorts, ipA)), wantIPs: []string{ip6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t)
			prefix := prefixFor(t)
			before := reset(t, tc.initial)
			if len(tc.others) > 0 {
				putLeases(t, prefix, 60, tc.others...)
			}
			ports := tc.ports
			if ports == nil {
				ports = httpsPorts
			}
			wantPorts := tc.wantPorts
			if wantPorts == nil {
				wantPorts = ports
			}
			r := newLease(t, prefix, time.Second)
			if err := r.ReconcileEndpoints(ctx, addr(t, tc.own), ports, tc.reconcilePorts); err != nil {
				t.Fatalf("ReconcileEndpoints: %v", err)
			}
			checkPublished(t, tc.wantIPs, wantPorts)
			after := getEndpoints(t)
			if tc.wantUnchanged && after.ResourceVersion != before.ResourceVersion {
				t.Errorf("Endpoints rewritten (resourceVersion %s -> %s), want untouched", before.ResourceVersion, after.ResourceVersion)
			}
			if keys := leaseKeys(t, prefix); !containsAll(keys, append([]string{tc.own}, tc.others...)) {
				t.Errorf("lease keys = %v, want ours (%s) and %v", keys, tc.own, tc.others)
			}
			checkSecondPassIsNoOp(ctx, t, r, addr(t, tc.own), ports, tc.reconcilePorts, after)
		})
	}
}

func containsAll(have, want []string) bool {
	set := map[string]bool{}
	for _, h := range have {
		set[h] = true
	}
	for _, w := range want {
		if !set[w] {
			return false
		}
	}
	return true
}

// Our key is <prefix>/masterleases/<ip>, on an etcd lease of the TTL,
// holding an Endpoints object as kube-apiserver writes there.
func TestLeaseKey(t *testing.T) {
	ctx := ctxFor(t)
	reset(t, nil)
	r := reconcilers.NewLease(client, etcd, "/registry", time.Second, codec)
	defer r.Destroy()
	if err := r.ReconcileEndpoints(ctx, addr(t, ipA), httpsPorts, true); err != nil {
		t.Fatal(err)
	}
	resp, err := etcd.Get(ctx, "/registry/masterleases/"+ipA)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("key /registry/masterleases/%s: %v, %v", ipA, resp, err)
	}
	kv := resp.Kvs[0]
	if kv.Lease == 0 {
		t.Fatalf("key not on a lease")
	}
	ttl, err := etcd.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		t.Fatal(err)
	}
	if ttl.GrantedTTL != 1 {
		t.Errorf("lease granted TTL = %ds, want 1s", ttl.GrantedTTL)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(kv.Value, nil, nil)
	if err != nil {
		t.Fatalf("decoding the lease value: %v", err)
	}
	e, ok := obj.(*corev1.Endpoints)
	if !ok || len(e.Subsets) != 1 || len(e.Subsets[0].Addresses) != 1 || e.Subsets[0].Addresses[0].IP != ipA {
		t.Errorf("lease value = %#v, want Endpoints listing %s", obj, ipA)
	}
	checkPublished(t, []string{ipA}, httpsPorts)

	// Kept alive beyond the TTL by keep-alives, without a reconcile.
	first := kv.ModRevision
	time.Sleep(1600 * time.Millisecond)
	resp, err = etcd.Get(ctx, "/registry/masterleases/"+ipA)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("key gone after the TTL although held: %v, %v", resp, err)
	}
	if resp.Kvs[0].ModRevision != first {
		t.Logf("note: key rewritten while held (revision %d -> %d)", first, resp.Kvs[0].ModRevision)
	}

	// The last apiserver may remove itself; the key goes too.
	listed, err := r.RemoveEndpoints(ctx, addr(t, ipA), httpsPorts)
	if err != nil || !listed {
		t.Fatalf("RemoveEndpoints = %v, %v; want true, nil", listed, err)
	}
	if keys := leaseKeys(t, "/registry"); len(keys) != 0 {
		t.Errorf("lease keys after RemoveEndpoints: %v", keys)
	}
	checkPublished(t, []string{}, httpsPorts)
	listed, err = r.RemoveEndpoints(ctx, addr(t, ipA), httpsPorts)
	if err != nil || listed {
		t.Errorf("second RemoveEndpoints = %v, %v; want false, nil", listed, err)
	}
}

// A crashed apiserver's key expires; the watch signals Changed and the next
// reconcile drops its address.
func TestLeaseExpiredKeyDropped(t *testing.T) {
	ctx := ctxFor(t)
	prefix := prefixFor(t)
	reset(t, nil)
	putLeases(t, prefix, 60, ipC)
	putLeases(t, prefix, 1, ipB) // the crashed one: nobody keeps it alive
	r := newLease(t, prefix, time.Second)
	if err := r.ReconcileEndpoints(ctx, addr(t, ipA), httpsPorts, true); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, []string{ipA, ipB, ipC}, httpsPorts)

	deadline := time.After(5 * time.Second)
	for {
		select {
		case <-r.Changed():
		case <-deadline:
			t.Fatalf("Changed did not fire for the expired key; keys: %v", leaseKeys(t, prefix))
		}
		if !containsAll(leaseKeys(t, prefix), []string{ipB}) {
			break
		}
	}
	if err := r.ReconcileEndpoints(ctx, addr(t, ipA), httpsPorts, true); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, []string{ipA, ipC}, httpsPorts)
}

// Changed fires when a lease key is deleted.
func TestLeaseChangedOnDelete(t *testing.T) {
	ctx := ctxFor(t)
	prefix := prefixFor(t)
	reset(t, nil)
	r := newLease(t, prefix, time.Second)
	if r.Changed() == nil {
		t.Fatal("Changed() is nil")
	}
	if err := r.ReconcileEndpoints(ctx, addr(t, ipA), httpsPorts, true); err != nil {
		t.Fatal(err)
	}
	// Wait until the watch is established: a write under the prefix
	// (not an address, so never listed) is signalled.
	eventually(t, 5*time.Second, "the lease watch", func() bool {
		if _, err := etcd.Put(ctx, prefix+"/masterleases/probe", "x"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-r.Changed():
			return true
		case <-time.After(100 * time.Millisecond):
			return false
		}
	})
	putLeases(t, prefix, 60, ipB)
	select {
	case <-r.Changed():
	case <-time.After(2 * time.Second):
		t.Fatal("Changed did not fire for a new key")
	}
	// Drain anything else pending, then delete.
	select {
	case <-r.Changed():
	default:
	}
	if _, err := etcd.Delete(ctx, prefix+"/masterleases/"+ipB); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Changed():
	case <-time.After(2 * time.Second):
		t.Fatal("Changed did not fire for a deleted key")
	}
}

// With no lease listed, a reconcile that is not stopping refuses to erase
// the endpoints.
func TestLeaseGuard(t *testing.T) {
	ctx := ctxFor(t)
	prefix := prefixFor(t)
	before := reset(t, endpoints(skipMirror, subset(httpsPorts, ipA, ipB)))
	r := newLease(t, prefix, time.Second)

	err := reconcilers.LeaseReconcile(ctx, r, httpsPorts, true, false)
	if !errors.Is(err, reconcilers.ErrNoLeases) {
		t.Fatalf("reconcile with no leases = %v, want ErrNoLeases", err)
	}
	if e := getEndpoints(t); e.ResourceVersion != before.ResourceVersion {
		t.Errorf("the guard let the endpoints be rewritten: %+v", e.Subsets)
	}
	// Also when the keys vanish between our hold and the reconcile.
	if err := reconcilers.LeaseHold(ctx, r, addr(t, ipA)); err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.Delete(ctx, prefix+"/masterleases/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if err := reconcilers.LeaseReconcile(ctx, r, httpsPorts, true, false); !errors.Is(err, reconcilers.ErrNoLeases) {
		t.Fatalf("reconcile after the keys vanished = %v, want ErrNoLeases", err)
	}
	if e := getEndpoints(t); e.ResourceVersion != before.ResourceVersion {
		t.Errorf("the guard let the endpoints be rewritten: %+v", e.Subsets)
	}
	// A stopping apiserver may erase them.
	if err := reconcilers.LeaseReconcile(ctx, r, httpsPorts, true, true); err != nil {
		t.Fatalf("reconcile allowing empty: %v", err)
	}
	checkPublished(t, []string{}, httpsPorts)
}

// kube-apiserver writes its key on every reconcile, so a key deleted from
// under a running apiserver comes back at the next one.
func TestLeaseOwnKeyRestored(t *testing.T) {
	ctx := ctxFor(t)
	prefix := prefixFor(t)
	reset(t, nil)
	putLeases(t, prefix, 60, ipB)
	r := newLease(t, prefix, time.Second)
	if err := r.ReconcileEndpoints(ctx, addr(t, ipA), httpsPorts, true); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, []string{ipA, ipB}, httpsPorts)
	if _, err := etcd.Delete(ctx, prefix+"/masterleases/"+ipA); err != nil {
		t.Fatal(err)
	}
	if err := r.ReconcileEndpoints(ctx, addr(t, ipA), httpsPorts, true); err != nil {
		t.Fatalf("ReconcileEndpoints after our key was deleted: %v", err)
	}
	if keys := leaseKeys(t, prefix); !containsAll(keys, []string{ipA, ipB}) {
		t.Errorf("lease keys = %v, want ours (%s) restored", keys, ipA)
	}
	checkPublished(t, []string{ipA, ipB}, httpsPorts)
}

func TestLeaseRemoveEndpoints(t *testing.T) {
	tests := []struct {
		name       string
		initial    *corev1.Endpoints
		others     []string
		hold       bool // we hold our key (else it is left from a crash)
		wantListed bool
		wantIPs    []string
		wantNone   bool
	}{
		{name: "no endpoints", wantNone: true},
		{
			name: "listed, held", hold: true, others: []string{ipB}, wantListed: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA, ipB)), wantIPs: []string{ipB},
		},
		{
			name: "listed, key left from a crash", others: []string{ipB}, wantListed: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA, ipB)), wantIPs: []string{ipB},
		},
		{
			name: "not listed", others: []string{ipB},
			initial: endpoints(skipMirror, subset(httpsPorts, ipB)), wantIPs: []string{ipB},
		},
		{
			name: "the last one", hold: true, wantListed: true,
			initial: endpoints(skipMirror, subset(httpsPorts, ipA)), wantIPs: []string{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t)
			prefix := prefixFor(t)
			reset(t, tc.initial)
			if len(tc.others) > 0 {
				putLeases(t, prefix, 60, tc.others...)
			}
			r := newLease(t, prefix, time.Second)
			if tc.hold {
				if err := reconcilers.LeaseHold(ctx, r, addr(t, ipA)); err != nil {
					t.Fatal(err)
				}
			} else {
				putLeases(t, prefix, 60, ipA)
			}
			listed, err := r.RemoveEndpoints(ctx, addr(t, ipA), httpsPorts)
			if err != nil {
				t.Fatalf("RemoveEndpoints: %v", err)
			}
			if listed != tc.wantListed {
				t.Errorf("RemoveEndpoints reported listed=%v, want %v", listed, tc.wantListed)
			}
			if keys := leaseKeys(t, prefix); containsAll(keys, []string{ipA}) {
				t.Errorf("our key is still there: %v", keys)
			}
			if tc.wantNone {
				if e := getEndpoints(t); e != nil {
					t.Errorf("RemoveEndpoints created Endpoints: %+v", e)
				}
				return
			}
			checkPublished(t, tc.wantIPs, httpsPorts)
		})
	}
}

// After StopReconciling, ReconcileEndpoints does nothing (no key, no
// write); RemoveEndpoints still removes us, even as the last one.
func TestLeaseStopReconciling(t *testing.T) {
	ctx := ctxFor(t)
	prefix := prefixFor(t)
	reset(t, nil)
	r := newLease(t, prefix, time.Second)
	if err := r.ReconcileEndpoints(ctx, addr(t, ipA), httpsPorts, true); err != nil {
		t.Fatal(err)
	}
	before := getEndpoints(t)
	r.StopReconciling()
	if err := r.ReconcileEndpoints(ctx, addr(t, ipB), httpsPorts, true); err != nil {
		t.Fatal(err)
	}
	if keys := leaseKeys(t, prefix); containsAll(keys, []string{ipB}) {
		t.Errorf("ReconcileEndpoints after StopReconciling stored a key: %v", keys)
	}
	if e := getEndpoints(t); e.ResourceVersion != before.ResourceVersion {
		t.Errorf("ReconcileEndpoints after StopReconciling wrote %+v", e.Subsets)
	}
	listed, err := r.RemoveEndpoints(ctx, addr(t, ipA), httpsPorts)
	if err != nil || !listed {
		t.Fatalf("RemoveEndpoints = %v, %v; want true, nil", listed, err)
	}
	checkPublished(t, []string{}, httpsPorts)
}

func TestNone(t *testing.T) {
	ctx := ctxFor(t)
	r := reconcilers.NewNone()
	defer r.Destroy()
	if r.Changed() != nil {
		t.Error("none has a Changed channel; want nil")
	}
	reset(t, nil)
	if err := r.ReconcileEndpoints(ctx, addr(t, ipA), httpsPorts, true); err != nil {
		t.Fatal(err)
	}
	if e := getEndpoints(t); e != nil {
		t.Errorf("none created Endpoints: %+v", e)
	}
	before := reset(t, endpoints(nil, subset([]corev1.EndpointPort{{Name: "x", Port: 1, Protocol: corev1.ProtocolUDP}}, ipB)))
	if err := r.ReconcileEndpoints(ctx, addr(t, ipA), httpsPorts, true); err != nil {
		t.Fatal(err)
	}
	r.StopReconciling()
	if listed, err := r.RemoveEndpoints(ctx, addr(t, ipB), httpsPorts); err != nil || listed {
		t.Errorf("RemoveEndpoints = %v, %v; want false, nil", listed, err)
	}
	if e := getEndpoints(t); e.ResourceVersion != before.ResourceVersion {
		t.Errorf("none rewrote the Endpoints: %+v", e)
	}
	if s := getSlice(t); s != nil {
		t.Errorf("none wrote an EndpointSlice: %+v", s)
	}
}

func TestParseType(t *testing.T) {
	tests := []struct {
		in      string
		want    reconcilers.Type
		wantErr bool
	}{
		{in: "lease", want: reconcilers.Lease},
		{in: "master-count", want: reconcilers.MasterCount},
		{in: "none", want: reconcilers.None},
		{in: "", wantErr: true},
		{in: "Lease", wantErr: true},
		{in: "instance-count", wantErr: true},
	}
	for _, tc := range tests {
		got, err := reconcilers.ParseType(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseType(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
