package clusterip

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/registry/core/service/ipallocator"
)

func serviceCIDR(name string, ready metav1.ConditionStatus, cidrs ...string) *networkingv1.ServiceCIDR {
	c := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
	if ready != "" {
		c.Status.Conditions = []metav1.Condition{{Type: networkingv1.ServiceCIDRConditionReady, Status: ready}}
	}
	return c
}

// newAllocator is an IPv4 allocator on a fake clientset holding objs,
// whose creates give objects a UID; it returns once the allocator has
// synced.
func newAllocator(t *testing.T, objs ...runtime.Object) (*Allocator, *fake.Clientset) {
	t.Helper()
	c := newClient(objs...)
	var uids atomic.Int64
	c.PrependReactor("create", "ipaddresses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ip := a.(k8stesting.CreateAction).GetObject().(*networkingv1.IPAddress)
		ip.UID = types.UID(fmt.Sprintf("uid-%d", uids.Add(1)))
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(c, 0)
	a, err := NewAllocator(api.IPv4Protocol, factory.Networking().V1().ServiceCIDRs(), factory.Networking().V1().IPAddresses(),
		c.NetworkingV1().IPAddresses())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
		a.Destroy()
	})
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), a.HasSynced) {
		t.Fatal("allocator did not sync")
	}
	return a, c
}

func svc(name string, ips ...net.IP) *api.Service {
	s := &api.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	for _, ip := range ips {
		s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, ip.String())
	}
	return s
}

// eventually waits until the allocator's informer shows what cond asks.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestAllocateRequested(t *testing.T) {
	a, _ := newAllocator(t, serviceCIDR("kubernetes", "", "10.0.0.0/24"), ipAddress("10.0.0.7", "u7", "other"))
	for _, tc := range []struct {
		ip   string
		want error
	}{
		{"10.0.0.10", nil},
		{"10.0.0.10", ipallocator.ErrAllocated}, // held by the line above
		{"10.0.0.7", ipallocator.ErrAllocated},  // taken: the informer has its IPAddress, and etcd
		{"10.0.0.0", &ipallocator.ErrNotInRange{IP: net.ParseIP("10.0.0.0"), ValidRange: "10.0.0.0/24"}},
		{"10.0.0.255", &ipallocator.ErrNotInRange{IP: net.ParseIP("10.0.0.255"), ValidRange: "10.0.0.0/24"}},
		{"10.0.1.1", ipallocator.ErrMismatchedNetwork},
		{"fd00::1", ipallocator.ErrMismatchedNetwork},
	} {
		err := a.Allocate(net.ParseIP(tc.ip))
		if fmt.Sprint(err) != fmt.Sprint(tc.want) {
			t.Errorf("Allocate(%s) = %v, want %v", tc.ip, err, tc.want)
		}
	}
}

func TestAllocateNextHoldsUntilReleasedAndKeepsTheStaticBand(t *testing.T) {
	// A /27 has 30 addresses; the lower 16 are for requested IPs.
	a, _ := newAllocator(t, serviceCIDR("kubernetes", "", "10.0.0.0/27"))
	static := netip.MustParseAddr("10.0.0.17") // first address after the band
	seen := map[string]bool{}
	for i := range 30 {
		ip, err := a.AllocateNext()
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		addr, _ := netip.AddrFromSlice(ip)
		if seen[ip.String()] {
			t.Fatalf("allocation %d: %s handed out twice", i, ip)
		}
		seen[ip.String()] = true
		if inBand := addr.Less(static); inBand != (i >= 14) {
			t.Errorf("allocation %d: %s, want the static band only once the 14 upper addresses are gone", i, ip)
		}
	}
	if _, err := a.AllocateNext(); !errors.Is(err, ipallocator.ErrFull) {
		t.Fatalf("31st allocation: %v, want %v", err, ipallocator.ErrFull)
	}
	if err := a.Release(net.ParseIP("10.0.0.20")); err != nil {
		t.Fatal(err)
	}
	if ip, err := a.AllocateNext(); err != nil || ip.String() != "10.0.0.20" {
		t.Fatalf("after releasing 10.0.0.20: AllocateNext() = %v, %v", ip, err)
	}
}

func TestAllocatesFromReadyServiceCIDRsOnly(t *testing.T) {
	deleting := serviceCIDR("deleting", "", "10.0.2.0/29")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	deleting.Finalizers = []string{"networking.k8s.io/service-cidr-finalizer"}
	a, _ := newAllocator(t, serviceCIDR("not-ready", metav1.ConditionFalse, "10.0.1.0/29"), deleting,
		serviceCIDR("ready", metav1.ConditionTrue, "10.0.3.0/29"))
	for range 6 {
		ip, err := a.AllocateNext()
		if err != nil {
			t.Fatal(err)
		}
		if !netip.MustParsePrefix("10.0.3.0/29").Contains(netip.MustParseAddr(ip.String())) {
			t.Fatalf("AllocateNext() = %s, from a ServiceCIDR not ready or being deleted", ip)
		}
	}
	if _, err := a.AllocateNext(); !errors.Is(err, ipallocator.ErrFull) {
		t.Fatalf("7th allocation: %v, want %v", err, ipallocator.ErrFull)
	}
	if err := a.Allocate(net.ParseIP("10.0.1.2")); !errors.Is(err, ipallocator.ErrMismatchedNetwork) {
		t.Errorf("Allocate from a ServiceCIDR not ready: %v, want %v", err, ipallocator.ErrMismatchedNetwork)
	}
}

func TestRecordCreatesTheHeldIPAddressesOnce(t *testing.T) {
	a, c := newAllocator(t, serviceCIDR("kubernetes", "", "10.0.0.0/24"))
	ip, err := a.AllocateNext()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Allocate(net.ParseIP("10.0.0.3")); err != nil {
		t.Fatal(err)
	}
	web := svc("web", ip, net.ParseIP("10.0.0.3"))
	for range 2 { // a retried update records again
		if err := a.Record(context.Background(), web); err != nil {
			t.Fatal(err)
		}
	}
	creates := 0
	for _, action := range c.Actions() {
		if action.Matches("create", "ipaddresses") {
			creates++
		}
	}
	if creates != 2 {
		t.Errorf("%d IPAddress creates, want 2", creates)
	}
	stored, err := c.NetworkingV1().IPAddresses().Get(context.Background(), ip.String(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := networkingv1.ParentReference{Resource: "services", Namespace: "ns", Name: "web"}
	if *stored.Spec.ParentRef != want || stored.Labels[networkingv1.LabelIPAddressFamily] != "IPv4" ||
		stored.Labels[networkingv1.LabelManagedBy] != ipallocator.ControllerName {
		t.Errorf("stored IPAddress: labels %v, parentRef %+v", stored.Labels, *stored.Spec.ParentRef)
	}
	// Once the informer shows it, the IP stays taken.
	eventually(t, "the informer to show the IPAddresses", func() bool { return a.Has(ip) && a.Has(net.ParseIP("10.0.0.3")) })
	if err := a.Allocate(ip); !errors.Is(err, ipallocator.ErrAllocated) {
		t.Errorf("Allocate(%s) after Record: %v, want %v", ip, err, ipallocator.ErrAllocated)
	}
}

// TestRecordedIPRemovedBehindTheAllocator: an IPAddress removed from etcd
// by something other than the allocator (a test server's Reset) before the
// informer showed it leaves no hold: its IP can be asked for again at once.
func TestRecordedIPRemovedBehindTheAllocator(t *testing.T) {
	a, c := newAllocator(t, serviceCIDR("kubernetes", "", "10.0.0.0/24"))
	ip := net.ParseIP("10.0.0.7")
	if err := a.Allocate(ip); err != nil {
		t.Fatal(err)
	}
	// The create succeeds, and the object is gone before the informer
	// sees it: the reactor answers without storing it.
	c.PrependReactor("create", "ipaddresses", func(action k8stesting.Action) (bool, runtime.Object, error) {
		created := action.(k8stesting.CreateAction).GetObject().(*networkingv1.IPAddress).DeepCopy()
		created.UID = "removed"
		return true, created, nil
	})
	if err := a.Record(context.Background(), svc("web", ip)); err != nil {
		t.Fatal(err)
	}
	if err := a.Allocate(ip); err != nil {
		t.Errorf("Allocate(%s) after its IPAddress was removed: %v, want it allocated", ip, err)
	}
}

func TestRequestedIPJustReleasedIsAllocatable(t *testing.T) {
	a, c := newAllocator(t, serviceCIDR("kubernetes", "", "10.0.0.0/24"))
	ip := net.ParseIP("10.0.0.1")
	if err := a.Allocate(ip); err != nil {
		t.Fatal(err)
	}
	if err := a.Record(context.Background(), svc("kubernetes", ip)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the informer to show the IPAddress", func() bool { return a.Has(ip) })
	// Deleted and asked for again at once, before the informer shows the
	// delete: etcd says it is free, and as with kube-apiserver the second
	// create succeeds.
	if err := a.Release(ip); err != nil {
		t.Fatal(err)
	}
	if err := a.Allocate(ip); err != nil {
		t.Fatalf("Allocate right after Release: %v", err)
	}
	if err := a.Record(context.Background(), svc("kubernetes", ip)); err != nil {
		t.Fatalf("Record right after Release: %v", err)
	}
	if got := owners(t, c); got[ip.String()] != "kubernetes" {
		t.Errorf("IPAddresses: %v", got)
	}
}

func TestRecordRefusesAnIPAnotherAPIServerTook(t *testing.T) {
	for _, tc := range []struct {
		name      string
		requested bool
		want      func(error) bool
	}{
		{"requested IP: 422, as kube-apiserver", true, apierrors.IsInvalid},
		{"chosen IP: 409, try again", false, apierrors.IsConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, c := newAllocator(t, serviceCIDR("kubernetes", "", "10.0.0.0/28"))
			var ip net.IP
			if tc.requested {
				ip = net.ParseIP("10.0.0.5")
				if err := a.Allocate(ip); err != nil {
					t.Fatal(err)
				}
			} else {
				var err error
				if ip, err = a.AllocateNext(); err != nil {
					t.Fatal(err)
				}
			}
			// Another apiserver stores the same IP before this one's
			// informer shows it.
			theirs := ipAddress(ip.String(), "theirs", "their-service")
			if err := c.Tracker().Add(theirs); err != nil {
				t.Fatal(err)
			}
			err := a.Record(context.Background(), svc("web", ip))
			if !tc.want(err) {
				t.Fatalf("Record: %v", err)
			}
			if tc.requested && err.Error() != `Service "web" is invalid: spec.clusterIPs: Invalid value: ["`+ip.String()+
				`"]: failed to allocate IP `+ip.String()+`: provided IP is already allocated` {
				t.Errorf("Record: %q, not kube-apiserver's message", err)
			}
			// The registry releases what it allocated for the refused
			// Service; that must not delete the other apiserver's object.
			if err := a.Release(ip); err != nil {
				t.Fatal(err)
			}
			if got := owners(t, c); got[ip.String()] != "their-service" {
				t.Errorf("IPAddresses after the release: %v", got)
			}
		})
	}
}

func TestReleaseDeletesWhatWasStored(t *testing.T) {
	a, c := newAllocator(t, serviceCIDR("kubernetes", "", "10.0.0.0/24"), ipAddress("10.0.0.7", "u7", "old"))
	// etcd checks a delete's UID precondition: 10.0.0.7 was deleted and
	// created again (u8) through another apiserver, and this one's
	// informer still shows u7.
	c.PrependReactor("delete", "ipaddresses", func(action k8stesting.Action) (bool, runtime.Object, error) {
		d := action.(k8stesting.DeleteActionImpl)
		if pre := d.DeleteOptions.Preconditions; d.Name == "10.0.0.7" && pre != nil && pre.UID != nil && *pre.UID != "u8" {
			return true, nil, apierrors.NewConflict(networkingv1.Resource("ipaddresses"), d.Name, errors.New("UID precondition failed"))
		}
		return false, nil, nil
	})
	// Held, never recorded: nothing to delete.
	held, err := a.AllocateNext()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(held); err != nil {
		t.Fatal(err)
	}
	// Recorded: deleted at once, whether or not the informer has seen it.
	recorded, err := a.AllocateNext()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Record(context.Background(), svc("web", recorded)); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(recorded); err != nil {
		t.Fatal(err)
	}
	// Not held: deleted by name, whatever UID the informer shows.
	if err := a.Release(net.ParseIP("10.0.0.7")); err != nil {
		t.Fatal(err)
	}
	if got := owners(t, c); len(got) != 0 {
		t.Errorf("IPAddresses left: %v", got)
	}
	var deleted []string
	for _, action := range c.Actions() {
		if d, ok := action.(k8stesting.DeleteActionImpl); ok && d.Resource.Resource == "ipaddresses" {
			deleted = append(deleted, d.Name)
		}
	}
	if len(deleted) != 2 {
		t.Errorf("IPAddress deletes: %v, want %s and 10.0.0.7", deleted, recorded)
	}
}

func TestOwnersReleaseKeepsAnotherRequestsHold(t *testing.T) {
	a, c := newAllocator(t, serviceCIDR("kubernetes", "", "10.0.0.0/24"))
	ip := net.ParseIP("10.0.0.7")
	// A request holds the IP; before this apiserver's informer shows it,
	// another apiserver stores it for Service "old", and "old" is deleted
	// through this one.
	if err := a.Allocate(ip); err != nil {
		t.Fatal(err)
	}
	if err := c.Tracker().Add(ipAddress(ip.String(), "u7", "old")); err != nil {
		t.Fatal(err)
	}
	a.Dropped(svc("old", ip), nil)
	if err := a.Release(ip); err != nil {
		t.Fatal(err)
	}
	// The owner's release deleted its IPAddress and kept the request's hold.
	if got := owners(t, c); len(got) != 0 {
		t.Fatalf("IPAddresses after the owner's release: %v", got)
	}
	if err := a.Allocate(ip); !errors.Is(err, ipallocator.ErrAllocated) {
		t.Errorf("Allocate of the IP a request holds: %v, want %v", err, ipallocator.ErrAllocated)
	}
	if err := a.Record(context.Background(), svc("new", ip)); err != nil {
		t.Fatal(err)
	}
	if got := owners(t, c); got[ip.String()] != "new" {
		t.Errorf("IPAddresses: %v", got)
	}
	// The drop was counted once: the next release is the request's
	// undoing its own.
	if err := a.Release(ip); err != nil {
		t.Fatal(err)
	}
	if got := owners(t, c); len(got) != 0 {
		t.Errorf("IPAddresses after the request's release: %v", got)
	}
}

func TestReleaseIsARequestsUnlessTheStorageDroppedTheIP(t *testing.T) {
	a, c := newAllocator(t, serviceCIDR("kubernetes", "", "10.0.0.0/24"))
	// A request holds each IP, and another apiserver stores each for a
	// Service of its own, before this apiserver's informer shows it.
	hold := func(ip string) net.IP {
		t.Helper()
		if err := a.Allocate(net.ParseIP(ip)); err != nil {
			t.Fatal(err)
		}
		if err := c.Tracker().Add(ipAddress(ip, "u-"+ip, "theirs-"+ip)); err != nil {
			t.Fatal(err)
		}
		return net.ParseIP(ip)
	}
	now := time.Now()
	a.now = func() time.Time { return now }
	kept, stale := hold("10.0.0.7"), hold("10.0.0.8")
	// An update that keeps an IP drops nothing: the release that follows
	// is the request's, which keeps the other apiserver's object.
	a.Dropped(svc("theirs-10.0.0.7", kept), svc("theirs-10.0.0.7", kept))
	// A drop no release followed within dropTTL is forgotten.
	a.Dropped(svc("theirs-10.0.0.8", stale), nil)
	a.now = func() time.Time { return now.Add(dropTTL + time.Second) }
	for _, ip := range []net.IP{kept, stale} {
		if err := a.Release(ip); err != nil {
			t.Fatal(err)
		}
	}
	if got := owners(t, c); got["10.0.0.7"] != "theirs-10.0.0.7" || got["10.0.0.8"] != "theirs-10.0.0.8" {
		t.Errorf("a request's release deleted another apiserver's IPAddress: %v", got)
	}
}

func TestDryRunHoldsNothing(t *testing.T) {
	a, c := newAllocator(t, serviceCIDR("kubernetes", "", "10.0.0.0/28"), ipAddress("10.0.0.7", "u7", "other"))
	dry := a.DryRun()
	if ip, err := dry.AllocateNext(); err != nil || ip.String() != "10.0.0.0" {
		t.Errorf("dry-run AllocateNext() = %v, %v; want kube-apiserver's 10.0.0.0", ip, err)
	}
	if err := dry.Allocate(net.ParseIP("10.0.0.3")); err != nil {
		t.Errorf("dry-run Allocate: %v", err)
	}
	if err := dry.Allocate(net.ParseIP("10.0.1.3")); fmt.Sprint(err) != fmt.Sprint(&ipallocator.ErrNotInRange{IP: net.ParseIP("10.0.1.3"), ValidRange: "10.0.0.0/28"}) {
		t.Errorf("dry-run Allocate out of range: %v", err)
	}
	if err := dry.Release(net.ParseIP("10.0.0.7")); err != nil {
		t.Fatal(err)
	}
	if err := a.Allocate(net.ParseIP("10.0.0.3")); err != nil {
		t.Errorf("Allocate after a dry run: %v", err)
	}
	if len(owners(t, c)) != 1 {
		t.Errorf("a dry run changed the IPAddresses: %v", owners(t, c))
	}
}

func TestSpans(t *testing.T) {
	for _, tc := range []struct {
		prefix       string
		first, last  string
		size, static uint64
		dynamicFirst string
		invalid      bool
	}{
		{prefix: "10.0.0.0/24", first: "10.0.0.1", last: "10.0.0.254", size: 254, static: 16, dynamicFirst: "10.0.0.17"},
		{prefix: "10.0.0.0/28", first: "10.0.0.1", last: "10.0.0.14", size: 14, static: 0, dynamicFirst: "10.0.0.1"},
		{prefix: "10.96.0.0/12", first: "10.96.0.1", last: "10.111.255.254", size: 1<<20 - 2, static: 256, dynamicFirst: "10.96.1.1"},
		{prefix: "fd00::/120", first: "fd00::1", last: "fd00::ff", size: 255, static: 16, dynamicFirst: "fd00::11"},
		{prefix: "fd00::/64", first: "fd00::1", last: "fd00::ffff:ffff:ffff:ffff", size: 1<<64 - 2, static: 256, dynamicFirst: "fd00::101"},
		{prefix: "fd00::/48", invalid: true},
		{prefix: "10.0.0.1/32", invalid: true},
		{prefix: "10.0.0.0/31", invalid: true},
	} {
		s, ok := newSpan(netip.MustParsePrefix(tc.prefix))
		if ok == tc.invalid {
			t.Errorf("%s: valid %v", tc.prefix, ok)
			continue
		}
		if tc.invalid {
			continue
		}
		if s.first.String() != tc.first || s.last.String() != tc.last || s.size != tc.size || s.static != tc.static ||
			add(s.first, s.static).String() != tc.dynamicFirst {
			t.Errorf("%s: first %s last %s size %d static %d dynamic from %s", tc.prefix, s.first, s.last, s.size, s.static, add(s.first, s.static))
		}
	}
}

func TestAllocationIsSynchronousAfterACollision(t *testing.T) {
	a, c := newAllocator(t, serviceCIDR("kubernetes", "", "10.0.0.0/28"))
	// Another apiserver has stored every IP but 10.0.0.9, and this one's
	// informer has not seen them yet.
	c.PrependReactor("create", "ipaddresses", func(action k8stesting.Action) (bool, runtime.Object, error) {
		name := action.(k8stesting.CreateAction).GetObject().(*networkingv1.IPAddress).Name
		if name == "10.0.0.9" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewAlreadyExists(networkingv1.Resource("ipaddresses"), name)
	})
	allocateNext := func(s *api.Service) (ip net.IP, err error) {
		err = a.Allocating(s, func() error {
			ip, err = a.AllocateNext()
			return err
		})
		return ip, err
	}

	// A chosen IP another apiserver took: the first choice not 10.0.0.9.
	var first net.IP
	for first == nil || first.String() == "10.0.0.9" {
		if first != nil {
			if err := a.Release(first); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		if first, err = allocateNext(svc("first")); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Record(context.Background(), svc("first", first)); !apierrors.IsConflict(err) {
		t.Fatalf("Record of %s, taken by another apiserver: %v, want a Conflict", first, err)
	}
	if err := a.Release(first); err != nil {
		t.Fatal(err)
	}

	// Now each allocation creates its IPAddress at once, past the taken
	// IPs.
	second, err := allocateNext(svc("second"))
	if err != nil {
		t.Fatal(err)
	}
	if second.String() != "10.0.0.9" {
		t.Fatalf("synchronous allocation: %s, want the one IP not taken", second)
	}
	if got := owners(t, c); got["10.0.0.9"] != "second" {
		t.Fatalf("IPAddresses after the synchronous allocation: %v", got)
	}
	creates := len(c.Actions())
	if err := a.Record(context.Background(), svc("second", second)); err != nil {
		t.Fatal(err)
	}
	if len(c.Actions()) != creates {
		t.Errorf("Record created the IPAddress of a synchronous allocation again: %v", c.Actions()[creates:])
	}
}
