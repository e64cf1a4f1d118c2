package clusterip

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeboot/kubeboot/internal/allocator"
)

func svc(ns, name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// newAllocator returns an allocator for cidr on a fresh IPAddress store,
// and the store's key prefix.
func newAllocator(t *testing.T, cidr string, known Known) (*Allocator, string) {
	t.Helper()
	prefix := newPrefix()
	return New(NewRange(netip.MustParsePrefix(cidr)), newIPStore(t, prefix), known), prefix
}

// getIPAddress reads the IPAddress object of ip; nil if there is none.
func getIPAddress(t *testing.T, a *Allocator, ip string) *networkingv1.IPAddress {
	t.Helper()
	obj, err := a.store.Get(context.Background(), ip, &metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("reading IPAddress %s: %v", ip, err)
	}
	return obj.(*networkingv1.IPAddress)
}

func TestAllocateCreatesIPAddress(t *testing.T) {
	tests := []struct {
		name, cidr, ip string
		family         corev1.IPFamily
	}{
		{name: "ipv4", cidr: "10.0.0.0/24", ip: "10.0.0.10", family: corev1.IPv4Protocol},
		{name: "ipv4 first address", cidr: "10.0.0.0/24", ip: "10.0.0.1", family: corev1.IPv4Protocol},
		{name: "ipv4 last usable address", cidr: "10.0.0.0/24", ip: "10.0.0.254", family: corev1.IPv4Protocol},
		{name: "ipv6", cidr: "fd00::/108", ip: "fd00::a", family: corev1.IPv6Protocol},
		// IPv6 ranges have no broadcast address: the last one is usable.
		{name: "ipv6 last address", cidr: "fd00::/120", ip: "fd00::ff", family: corev1.IPv6Protocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			a, _ := newAllocator(t, tt.cidr, nil)
			if a.Family() != tt.family {
				t.Errorf("Family() = %s, want %s", a.Family(), tt.family)
			}
			owner := svc("ns1", "web")
			if err := a.Allocate(ctx, netip.MustParseAddr(tt.ip), owner, false); err != nil {
				t.Fatalf("Allocate(%s): %v", tt.ip, err)
			}
			got := getIPAddress(t, a, tt.ip)
			if got == nil {
				t.Fatalf("no IPAddress %s after Allocate", tt.ip)
			}
			wantLabels := map[string]string{
				"ipaddress.kubernetes.io/ip-family":  string(tt.family),
				"ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io",
			}
			for k, v := range wantLabels {
				if got.Labels[k] != v {
					t.Errorf("label %s = %q, want %q (labels %v)", k, got.Labels[k], v, got.Labels)
				}
			}
			wantRef := networkingv1.ParentReference{Group: "", Resource: "services", Namespace: "ns1", Name: "web"}
			if got.Spec.ParentRef == nil || *got.Spec.ParentRef != wantRef {
				t.Errorf("parentRef = %+v, want %+v", got.Spec.ParentRef, wantRef)
			}

			// A second allocation, by anyone, is refused with upstream's error.
			for _, other := range []*corev1.Service{owner, svc("ns2", "other")} {
				err := a.Allocate(ctx, netip.MustParseAddr(tt.ip), other, false)
				if !errors.Is(err, allocator.ErrAllocated) {
					t.Errorf("second Allocate(%s) for %s/%s = %v, want ErrAllocated", tt.ip, other.Namespace, other.Name, err)
				}
				if err != nil && err.Error() != "provided IP is already allocated" {
					t.Errorf("error text %q, want upstream's", err)
				}
				err = a.Allocate(ctx, netip.MustParseAddr(tt.ip), other, true)
				if !errors.Is(err, allocator.ErrAllocated) {
					t.Errorf("dry-run Allocate(%s) of a held IP = %v, want ErrAllocated", tt.ip, err)
				}
			}
			if ref := getIPAddress(t, a, tt.ip).Spec.ParentRef; *ref != wantRef {
				t.Errorf("a refused Allocate changed the owner to %+v", ref)
			}
		})
	}
}

func TestAllocateRefusesAddressesOutsideTheRange(t *testing.T) {
	tests := []struct {
		name, cidr, ip string
		wantErr        error // sentinel; nil for IPNotInRangeError
	}{
		{name: "other network", cidr: "10.0.0.0/24", ip: "10.0.1.5", wantErr: allocator.ErrNotInNetwork},
		{name: "just below", cidr: "10.0.0.0/24", ip: "9.255.255.255", wantErr: allocator.ErrNotInNetwork},
		{name: "just above", cidr: "10.0.0.0/24", ip: "10.0.1.0", wantErr: allocator.ErrNotInNetwork},
		{name: "other family", cidr: "10.0.0.0/24", ip: "fd00::5", wantErr: allocator.ErrNotInNetwork},
		{name: "ipv6 other network", cidr: "fd00::/108", ip: "fd00::10:0", wantErr: allocator.ErrNotInNetwork},
		{name: "ipv4 network address", cidr: "10.0.0.0/24", ip: "10.0.0.0"},
		{name: "ipv4 broadcast address", cidr: "10.0.0.0/24", ip: "10.0.0.255"},
		{name: "ipv4 /12 broadcast address", cidr: "10.96.0.0/12", ip: "10.111.255.255"},
		{name: "ipv6 network address", cidr: "fd00::/108", ip: "fd00::"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, prefix := newAllocator(t, tt.cidr, nil)
			for _, dryRun := range []bool{false, true} {
				err := a.Allocate(context.Background(), netip.MustParseAddr(tt.ip), svc("ns", "s"), dryRun)
				if tt.wantErr != nil {
					if !errors.Is(err, tt.wantErr) {
						t.Errorf("Allocate(%s, dryRun=%v) = %v, want %v", tt.ip, dryRun, err, tt.wantErr)
					}
					continue
				}
				var notInRange *allocator.IPNotInRangeError
				if !errors.As(err, &notInRange) {
					t.Errorf("Allocate(%s, dryRun=%v) = %v, want an IPNotInRangeError", tt.ip, dryRun, err)
				} else if notInRange.ValidRange != tt.cidr {
					t.Errorf("ValidRange = %q, want %q", notInRange.ValidRange, tt.cidr)
				}
			}
			if n := storedIPAddresses(t, prefix); n != 0 {
				t.Errorf("%d IPAddresses stored after refused allocations", n)
			}
		})
	}
}

// kube-apiserver (pkg/registry/core/service/ipallocator, ErrNotInRange)
// names the refused IP: "the provided IP (10.0.0.0) is not in the valid
// range. The range of valid IPs is 10.0.0.0/24". Users see it inside
// "failed to allocate IP 10.0.0.0: ...".
func TestIPNotInRangeErrorTextMatchesUpstream(t *testing.T) {
	a, _ := newAllocator(t, "10.0.0.0/24", nil)
	err := a.Allocate(context.Background(), netip.MustParseAddr("10.0.0.0"), svc("ns", "s"), false)
	want := "the provided IP (10.0.0.0) is not in the valid range. The range of valid IPs is 10.0.0.0/24"
	if err == nil || err.Error() != want {
		t.Errorf("Allocate(network address) = %v\nwant upstream's text %q", err, want)
	}
}

// upperBand and lowerBand list the addresses AllocateNext should prefer
// and fall back to.
func bands(r Range) (upper, lower map[netip.Addr]bool) {
	upper, lower = map[netip.Addr]bool{}, map[netip.Addr]bool{}
	for off := r.first; off <= r.last; off++ {
		if off < r.first+r.reserved {
			lower[r.Addr(off)] = true
		} else {
			upper[r.Addr(off)] = true
		}
	}
	return upper, lower
}

func TestAllocateNextPrefersUpperBandThenLowerThenFull(t *testing.T) {
	tests := []struct {
		name, cidr   string
		upper, lower int
		// taken are allocated (as requested IPs) before dynamic allocation.
		taken []string
	}{
		{name: "/28 has no static band", cidr: "10.0.0.0/28", upper: 14, lower: 0},
		{name: "/27", cidr: "10.0.0.0/27", upper: 14, lower: 16},
		{name: "/27 with requested IPs in both bands", cidr: "10.0.0.0/27", upper: 14, lower: 16, taken: []string{"10.0.0.1", "10.0.0.16", "10.0.0.17", "10.0.0.30"}},
		{name: "ipv6 /124", cidr: "fd00::/124", upper: 15, lower: 0},
		{name: "ipv6 /123", cidr: "fd00::/123", upper: 15, lower: 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			a, prefix := newAllocator(t, tt.cidr, nil)
			upper, lower := bands(a.Range())
			if len(upper) != tt.upper || len(lower) != tt.lower {
				t.Fatalf("bands: %d upper, %d lower; want %d, %d", len(upper), len(lower), tt.upper, tt.lower)
			}
			held := map[netip.Addr]bool{}
			for _, s := range tt.taken {
				ip := netip.MustParseAddr(s)
				if err := a.Allocate(ctx, ip, svc("ns", "static-"+s), false); err != nil {
					t.Fatal(err)
				}
				held[ip] = true
			}
			freeUpper := 0
			for ip := range upper {
				if !held[ip] {
					freeUpper++
				}
			}
			freeTotal := len(upper) + len(lower) - len(held)
			for i := 0; i < freeTotal; i++ {
				ip, err := a.AllocateNext(ctx, svc("ns", fmt.Sprintf("dyn-%d", i)), false)
				if err != nil {
					t.Fatalf("AllocateNext #%d: %v", i, err)
				}
				if held[ip] {
					t.Fatalf("AllocateNext #%d returned %s, which is already held", i, ip)
				}
				held[ip] = true
				if i < freeUpper && !upper[ip] {
					t.Errorf("AllocateNext #%d = %s, in the static band while the upper band has free addresses", i, ip)
				}
				if !upper[ip] && !lower[ip] {
					t.Errorf("AllocateNext #%d = %s, outside the usable range", i, ip)
				}
				if o := getIPAddress(t, a, ip.String()); o == nil || o.Spec.ParentRef.Name != fmt.Sprintf("dyn-%d", i) {
					t.Errorf("IPAddress of %s = %+v, want one owned by dyn-%d", ip, o, i)
				}
			}
			// (A dry run does not look for a free address, as upstream's,
			// which answers the network address without looking.)
			if ip, err := a.AllocateNext(ctx, svc("ns", "one-too-many"), false); !errors.Is(err, allocator.ErrFull) {
				t.Errorf("AllocateNext on a full range = %s, %v; want ErrFull", ip, err)
			} else if err.Error() != "range is full" {
				t.Errorf("error text %q, want upstream's", err)
			}
			if n := storedIPAddresses(t, prefix); n != int64(len(upper)+len(lower)) {
				t.Errorf("%d IPAddresses stored, want %d", n, len(upper)+len(lower))
			}
			// A freed address is handed out again.
			var some netip.Addr
			for ip := range held {
				some = ip
				break
			}
			if err := a.Release(ctx, some, nil); err != nil {
				t.Fatal(err)
			}
			if ip, err := a.AllocateNext(ctx, svc("ns", "again"), false); err != nil || ip != some {
				t.Errorf("AllocateNext after releasing %s = %s, %v", some, ip, err)
			}
		})
	}
}

func TestDryRunCreatesNothing(t *testing.T) {
	ctx := context.Background()
	a, prefix := newAllocator(t, "10.0.0.0/27", nil)
	upper, _ := bands(a.Range())
	for i := 0; i < 20; i++ {
		ip, err := a.AllocateNext(ctx, svc("ns", "dry"), true)
		if err != nil {
			t.Fatalf("dry-run AllocateNext: %v", err)
		}
		if !upper[ip] {
			t.Errorf("dry-run AllocateNext = %s, not a free upper-band address", ip)
		}
	}
	if err := a.Allocate(ctx, netip.MustParseAddr("10.0.0.5"), svc("ns", "dry"), true); err != nil {
		t.Errorf("dry-run Allocate of a free IP: %v", err)
	}
	if n := storedIPAddresses(t, prefix); n != 0 {
		t.Errorf("dry runs stored %d IPAddresses", n)
	}
	// The real allocation still succeeds.
	if err := a.Allocate(ctx, netip.MustParseAddr("10.0.0.5"), svc("ns", "real"), false); err != nil {
		t.Errorf("Allocate after a dry run: %v", err)
	}
}

func TestRelease(t *testing.T) {
	owner := svc("ns", "owner")
	tests := []struct {
		name      string
		allocated bool // whether owner holds the IP first
		releaser  *corev1.Service
		wantGone  bool
	}{
		{name: "owner releases", allocated: true, releaser: svc("ns", "owner"), wantGone: true},
		{name: "another service in the same namespace does not", allocated: true, releaser: svc("ns", "thief"), wantGone: false},
		{name: "a same-named service in another namespace does not", allocated: true, releaser: svc("other", "owner"), wantGone: false},
		{name: "no owner releases unconditionally", allocated: true, releaser: nil, wantGone: true},
		{name: "a free IP is a no-op", allocated: false, releaser: svc("ns", "owner"), wantGone: true},
		{name: "a free IP without owner is a no-op", allocated: false, releaser: nil, wantGone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			a, _ := newAllocator(t, "10.0.0.0/24", nil)
			ip := netip.MustParseAddr("10.0.0.42")
			if tt.allocated {
				if err := a.Allocate(ctx, ip, owner, false); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Release(ctx, ip, tt.releaser); err != nil {
				t.Fatalf("Release: %v", err)
			}
			got := getIPAddress(t, a, ip.String())
			if gone := got == nil; gone != tt.wantGone {
				t.Fatalf("after Release, IPAddress present = %v, want %v", !gone, !tt.wantGone)
			}
			if got != nil && got.Spec.ParentRef.Name != owner.Name {
				t.Errorf("owner changed to %+v", got.Spec.ParentRef)
			}
			// Released IPs can be allocated again; kept ones cannot.
			err := a.Allocate(ctx, ip, svc("ns", "next"), false)
			if tt.wantGone && err != nil {
				t.Errorf("Allocate after release: %v", err)
			}
			if !tt.wantGone && !errors.Is(err, allocator.ErrAllocated) {
				t.Errorf("Allocate of a kept IP = %v, want ErrAllocated", err)
			}
		})
	}
}

// knownFunc is a Known cache under the test's control.
type knownFunc func(ip string) bool

func (f knownFunc) Has(ip string) bool { return f(ip) }

// The informer's view only guides the choice: a cache that lags behind
// etcd (missing IPs other apiservers took) never leads to a double
// allocation, and a stale entry only makes an address look taken.
func TestAllocateNextWithLaggingKnownCache(t *testing.T) {
	ctx := context.Background()
	prefix := newPrefix()
	rng := NewRange(netip.MustParsePrefix("10.0.0.0/27"))
	other := New(rng, newIPStore(t, prefix), nil)
	upper, lower := bands(rng)
	// Another apiserver took every upper-band address but one.
	var left netip.Addr
	for ip := range upper {
		if !left.IsValid() {
			left = ip
			continue
		}
		if err := other.Allocate(ctx, ip, svc("ns", "elsewhere"), false); err != nil {
			t.Fatal(err)
		}
	}
	// This apiserver's cache has seen none of that.
	a := New(rng, newIPStore(t, prefix), knownFunc(func(string) bool { return false }))
	if ip, err := a.AllocateNext(ctx, svc("ns", "mine"), false); err != nil || ip != left {
		t.Errorf("AllocateNext = %s, %v; want the one free upper-band address %s", ip, err, left)
	}
	// And when the cache wrongly claims a free address is taken, it is
	// skipped, not double-allocated: the next pick comes from the lower band.
	stale := New(rng, newIPStore(t, prefix), knownFunc(func(ip string) bool { return upper[netip.MustParseAddr(ip)] }))
	ip, err := stale.AllocateNext(ctx, svc("ns", "mine2"), false)
	if err != nil || !lower[ip] {
		t.Errorf("AllocateNext with every upper address cached = %s, %v; want a lower-band address", ip, err)
	}
}

// Many goroutines on one allocator, and a second allocator on the same
// etcd (a second apiserver), never hand out an address twice.
func TestConcurrentAllocateNextNeverDoubleAllocates(t *testing.T) {
	tests := []struct {
		name       string
		cidr       string
		goroutines int
		each       int
		wantOK     int  // successful allocations
		allUpper   bool // whether all of them must be in the upper band
	}{
		// 238 upper-band addresses; 64*3 = 192 fit there.
		{name: "room for all", cidr: "10.0.0.0/24", goroutines: 64, each: 3, wantOK: 192, allUpper: true},
		// 30 addresses for 48 requests: exactly 30 succeed, the rest are
		// told the range is full.
		{name: "more requests than addresses", cidr: "10.0.0.0/27", goroutines: 48, each: 1, wantOK: 30},
		{name: "ipv6", cidr: "fd00::/108", goroutines: 64, each: 2, wantOK: 128, allUpper: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			prefix := newPrefix()
			rng := NewRange(netip.MustParsePrefix(tt.cidr))
			apiservers := []*Allocator{New(rng, newIPStore(t, prefix), nil), New(rng, newIPStore(t, prefix), nil)}
			upper, _ := bands(rng)

			var mu sync.Mutex
			got := map[netip.Addr]string{}
			var full, other int
			var wg sync.WaitGroup
			for g := 0; g < tt.goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					a := apiservers[g%2]
					for i := 0; i < tt.each; i++ {
						name := fmt.Sprintf("s-%d-%d", g, i)
						ip, err := a.AllocateNext(ctx, svc("ns", name), false)
						mu.Lock()
						switch {
						case err == nil:
							if prev, dup := got[ip]; dup {
								t.Errorf("%s handed out twice: to %s and %s", ip, prev, name)
							}
							got[ip] = name
						case errors.Is(err, allocator.ErrFull):
							full++
						default:
							other++
							t.Errorf("AllocateNext: %v", err)
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if len(got) != tt.wantOK {
				t.Errorf("%d allocations succeeded, want %d (%d full, %d other errors)", len(got), tt.wantOK, full, other)
			}
			if full+len(got)+other != tt.goroutines*tt.each {
				t.Errorf("lost replies")
			}
			// Every reply is backed by its IPAddress, owned by whom it was
			// given to, and there is nothing else.
			for ip, name := range got {
				o := getIPAddress(t, apiservers[0], ip.String())
				if o == nil || o.Spec.ParentRef.Name != name {
					t.Errorf("IPAddress %s = %+v, want owner %s", ip, o, name)
				}
				if tt.allUpper && !upper[ip] {
					t.Errorf("%s is in the static band although the upper band had room", ip)
				}
			}
			if n := storedIPAddresses(t, prefix); n != int64(len(got)) {
				t.Errorf("%d IPAddresses stored for %d allocations", n, len(got))
			}
		})
	}
}

// Requested and dynamic allocations racing for the same addresses: each
// address ends up with exactly one owner, and every caller that was told
// "yes" is that owner.
func TestConcurrentAllocateAndAllocateNext(t *testing.T) {
	ctx := context.Background()
	prefix := newPrefix()
	rng := NewRange(netip.MustParsePrefix("10.0.0.0/28"))
	apiservers := []*Allocator{New(rng, newIPStore(t, prefix), nil), New(rng, newIPStore(t, prefix), nil)}
	var mu sync.Mutex
	winners := map[netip.Addr][]string{}
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := apiservers[g%2]
			name := fmt.Sprintf("s-%d", g)
			var ip netip.Addr
			var err error
			if g%3 == 0 {
				ip, err = a.AllocateNext(ctx, svc("ns", name), false)
			} else {
				ip = rng.Addr(1 + g%rng.Size())
				err = a.Allocate(ctx, ip, svc("ns", name), false)
			}
			if err != nil {
				if !errors.Is(err, allocator.ErrAllocated) && !errors.Is(err, allocator.ErrFull) {
					t.Errorf("%s: %v", name, err)
				}
				return
			}
			mu.Lock()
			winners[ip] = append(winners[ip], name)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for ip, names := range winners {
		if len(names) != 1 {
			t.Errorf("%s was given to %v", ip, names)
			continue
		}
		if o := getIPAddress(t, apiservers[1], ip.String()); o == nil || o.Spec.ParentRef.Name != names[0] {
			t.Errorf("IPAddress %s = %+v, want owner %s", ip, o, names[0])
		}
	}
	if n := storedIPAddresses(t, prefix); n != int64(len(winners)) {
		t.Errorf("%d IPAddresses stored, %d winners", n, len(winners))
	}
}

func TestAllocateNextHonoursContext(t *testing.T) {
	a, prefix := newAllocator(t, "10.0.0.0/24", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ip, err := a.AllocateNext(ctx, svc("ns", "s"), false); err == nil {
		t.Errorf("AllocateNext with a cancelled context = %s, want an error", ip)
	}
	if n := storedIPAddresses(t, prefix); n != 0 {
		t.Errorf("%d IPAddresses stored", n)
	}
}
