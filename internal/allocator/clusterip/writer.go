package clusterip

import (
	"context"
	"fmt"
	"sync"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	networkingclient "k8s.io/client-go/kubernetes/typed/networking/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/klog/v2"
)

// Writer is the client through which upstream's MetaAllocator stores the
// IPAddress object of each ClusterIP it hands out. The MetaAllocator holds
// one process-wide lock from choosing an IP until its IPAddress is stored,
// so every dynamic allocation waits for the previous one's etcd commit and
// Service creates run one at a time (kube-apiserver managed 180-317/s here).
// Writer shortens that wait to the choice: Create reserves the name in
// memory, answers at once and stores the object in the background, and
// Await, which the Services storage calls before it stores a Service,
// blocks until the IPAddresses of the Service's IPs are stored, or fails
// if one could not be. A Service is therefore never stored before its
// IPAddresses, as upstream; the commits of concurrent creates overlap.
//
// Only IPAddresses' Create and Delete change; everything else is the
// wrapped client's.
//
// A Release can come from another owner of the same IP (a Service deleted
// while this one's create was in flight), so what Await reports is kept
// per owner and IP, apart from the name reservation a Release ends.
type Writer struct {
	networkingclient.NetworkingV1Interface
	stored networkinglisters.IPAddressLister

	mu sync.Mutex
	// writes are the IPAddress creates not yet visible in stored, by name:
	// a name here is taken.
	writes map[string]*write
	// owned are the same creates by owner and name, for Await; Await
	// removes what it read, a new create for the same owner and name
	// replaces it.
	owned map[ownedName]*write
	// syncUntil: creates are synchronous until then, as upstream's, since
	// a background create found its name taken (another apiserver, a
	// nearly full range). A taken name is then the MetaAllocator's cue to
	// try the next IP, where in the background it fails the Service create.
	syncUntil time.Time
}

// ownedName is an IPAddress name and the Service ("namespace/name") it
// was created for.
type ownedName struct{ owner, name string }

// write is one IPAddress create in the background.
type write struct {
	started time.Time
	done    chan struct{}
	err     error // set before done is closed
}

// collisionBackoff is how long creates stay synchronous after one found
// its name taken.
const collisionBackoff = 10 * time.Second

// awaitWithin bounds how long what Await would report is kept: a Service
// create stores (and awaits) within its request, which times out after a
// minute.
const awaitWithin = 2 * time.Minute

// NewWriter wraps client; stored lists the IPAddresses the MetaAllocator
// sees (its informer's lister), so that a name stays reserved until its
// object is there.
func NewWriter(client networkingclient.NetworkingV1Interface, stored networkinglisters.IPAddressLister) *Writer {
	return &Writer{NetworkingV1Interface: client, stored: stored, writes: map[string]*write{}, owned: map[ownedName]*write{}}
}

// IPAddresses implements networkingclient.IPAddressesGetter.
func (w *Writer) IPAddresses() networkingclient.IPAddressInterface {
	return writerIPAddresses{IPAddressInterface: w.NetworkingV1Interface.IPAddresses(), w: w}
}

// Await blocks until the IPAddresses this Writer is creating for the
// Service owner ("namespace/name") under the names ips are stored, and
// returns a Conflict if one could not be (another apiserver stored the
// same IP first) or ctx's error.
func (w *Writer) Await(ctx context.Context, owner string, ips []string) error {
	for _, ip := range ips {
		key := ownedName{owner: owner, name: ip}
		w.mu.Lock()
		wr := w.owned[key]
		w.mu.Unlock()
		if wr == nil {
			continue
		}
		select {
		case <-wr.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		w.mu.Lock()
		if w.owned[key] == wr {
			delete(w.owned, key)
		}
		w.mu.Unlock()
		if wr.err != nil {
			return apierrors.NewConflict(networkingv1.Resource("ipaddresses"), ip,
				fmt.Errorf("ClusterIP %s could not be recorded: %w", ip, wr.err))
		}
	}
	return nil
}

// ownerOf is the "namespace/name" of the Service ip is for.
func ownerOf(ip *networkingv1.IPAddress) string {
	if ip.Spec.ParentRef == nil {
		return ""
	}
	return ip.Spec.ParentRef.Namespace + "/" + ip.Spec.ParentRef.Name
}

// reserve starts storing ip in the background unless its name is taken;
// it answers as the API would have: AlreadyExists for a taken name.
func (w *Writer) reserve(ip *networkingv1.IPAddress, opts metav1.CreateOptions, create func(context.Context, *networkingv1.IPAddress, metav1.CreateOptions) (*networkingv1.IPAddress, error)) (*networkingv1.IPAddress, error) {
	name := ip.Name
	key := ownedName{owner: ownerOf(ip), name: name}
	if _, err := w.stored.Get(name); err == nil {
		// Only a Service's own ClusterIP can be one the lister shows (the
		// MetaAllocator chooses among names it does not). It may have been
		// deleted since: let etcd decide, as upstream.
		w.mu.Lock()
		delete(w.owned, key) // what Await reads is this answer
		w.mu.Unlock()
		return create(context.Background(), ip, opts)
	}
	w.mu.Lock()
	w.forgetVisibleLocked()
	if _, taken := w.writes[name]; taken {
		w.mu.Unlock()
		return nil, apierrors.NewAlreadyExists(networkingv1.Resource("ipaddresses"), name)
	}
	if time.Now().Before(w.syncUntil) {
		delete(w.owned, key)
		w.mu.Unlock()
		return create(context.Background(), ip, opts)
	}
	wr := &write{started: time.Now(), done: make(chan struct{})}
	w.writes[name] = wr
	w.owned[key] = wr
	w.mu.Unlock()

	obj := ip.DeepCopy()
	go func() {
		_, wr.err = create(context.Background(), obj, opts)
		if wr.err != nil {
			klog.V(2).InfoS("Storing an IPAddress failed", "ip", name, "err", wr.err)
		}
		if apierrors.IsAlreadyExists(wr.err) {
			w.mu.Lock()
			w.syncUntil = time.Now().Add(collisionBackoff)
			w.mu.Unlock()
		}
		close(wr.done)
	}()
	return ip.DeepCopy(), nil
}

// forgetVisibleLocked ends the name reservations of stored writes the
// lister shows now (from then on the MetaAllocator sees the name taken by
// itself), and drops what Await never read of writes long over.
func (w *Writer) forgetVisibleLocked() {
	for name, wr := range w.writes {
		select {
		case <-wr.done:
		default:
			continue
		}
		if wr.err != nil {
			continue // held until Release, which the failed Service create calls
		}
		if _, err := w.stored.Get(name); err == nil {
			delete(w.writes, name)
		}
	}
	for key, wr := range w.owned {
		if time.Since(wr.started) > awaitWithin {
			delete(w.owned, key) // its Service create failed before storing
		}
	}
}

// release deletes the IPAddress name once its background create, if any,
// is over; a create that failed stored nothing of ours to delete. Await
// still reports that failure to the create's owner.
func (w *Writer) release(ctx context.Context, name string, opts metav1.DeleteOptions, del func(context.Context, string, metav1.DeleteOptions) error) error {
	w.mu.Lock()
	wr := w.writes[name]
	delete(w.writes, name)
	w.mu.Unlock()
	if wr != nil {
		select {
		case <-wr.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if wr.err != nil {
			return nil
		}
	}
	return del(ctx, name, opts)
}

type writerIPAddresses struct {
	networkingclient.IPAddressInterface
	w *Writer
}

func (c writerIPAddresses) Create(_ context.Context, ip *networkingv1.IPAddress, opts metav1.CreateOptions) (*networkingv1.IPAddress, error) {
	return c.w.reserve(ip, opts, c.IPAddressInterface.Create)
}

func (c writerIPAddresses) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return c.w.release(ctx, name, opts, c.IPAddressInterface.Delete)
}
