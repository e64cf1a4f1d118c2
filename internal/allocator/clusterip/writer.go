package clusterip

import (
	"context"
	"fmt"
	"sync"

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
// Service creates run one at a time (kube-apiserver manages ~180/s here).
// Writer shortens that wait to the choice: Create reserves the name in
// memory, answers at once and stores the object in the background, and
// Await, which the Services storage calls before it stores a Service,
// blocks until the IPAddresses of the Service's IPs are stored, or fails
// if one could not be. A Service is therefore never stored before its
// IPAddresses, as upstream; the commits of concurrent creates overlap.
//
// Only IPAddresses' Create and Delete change; everything else is the
// wrapped client's.
type Writer struct {
	networkingclient.NetworkingV1Interface
	stored networkinglisters.IPAddressLister

	mu sync.Mutex
	// writes are the IPAddress creates not yet visible in stored, by name.
	writes map[string]*write
}

// write is one IPAddress create in the background.
type write struct {
	done chan struct{}
	err  error // set before done is closed
}

// NewWriter wraps client; stored lists the IPAddresses the MetaAllocator
// sees (its informer's lister), so that a name stays reserved until its
// object is there.
func NewWriter(client networkingclient.NetworkingV1Interface, stored networkinglisters.IPAddressLister) *Writer {
	return &Writer{NetworkingV1Interface: client, stored: stored, writes: map[string]*write{}}
}

// IPAddresses implements networkingclient.IPAddressesGetter.
func (w *Writer) IPAddresses() networkingclient.IPAddressInterface {
	return writerIPAddresses{IPAddressInterface: w.NetworkingV1Interface.IPAddresses(), w: w}
}

// Await blocks until the IPAddress of each of ips that this Writer is
// creating is stored, and returns a Conflict if one could not be (another
// apiserver stored the same IP first) or ctx's error.
func (w *Writer) Await(ctx context.Context, ips []string) error {
	for _, ip := range ips {
		w.mu.Lock()
		wr := w.writes[ip]
		w.mu.Unlock()
		if wr == nil {
			continue
		}
		select {
		case <-wr.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if wr.err != nil {
			return apierrors.NewConflict(networkingv1.Resource("ipaddresses"), ip,
				fmt.Errorf("ClusterIP %s could not be recorded: %w", ip, wr.err))
		}
	}
	return nil
}

// reserve starts storing ip in the background unless its name is taken;
// it answers as the API would have: AlreadyExists for a taken name.
func (w *Writer) reserve(ip *networkingv1.IPAddress, opts metav1.CreateOptions, create func(context.Context, *networkingv1.IPAddress, metav1.CreateOptions) (*networkingv1.IPAddress, error)) (*networkingv1.IPAddress, error) {
	name := ip.Name
	if _, err := w.stored.Get(name); err == nil {
		// Only a Service's own ClusterIP can be one the lister shows (the
		// MetaAllocator chooses among names it does not). It may have been
		// deleted since: let etcd decide, as upstream.
		return create(context.Background(), ip, opts)
	}
	w.mu.Lock()
	w.forgetVisibleLocked()
	if _, taken := w.writes[name]; taken {
		w.mu.Unlock()
		return nil, apierrors.NewAlreadyExists(networkingv1.Resource("ipaddresses"), name)
	}
	wr := &write{done: make(chan struct{})}
	w.writes[name] = wr
	w.mu.Unlock()

	obj := ip.DeepCopy()
	go func() {
		_, wr.err = create(context.Background(), obj, opts)
		if wr.err != nil {
			klog.V(2).InfoS("Storing an IPAddress failed", "ip", name, "err", wr.err)
		}
		close(wr.done)
	}()
	return ip.DeepCopy(), nil
}

// forgetVisibleLocked drops the stored writes the lister shows now: from
// then on the MetaAllocator sees the name taken by itself.
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
}

// release deletes the IPAddress name once its background create, if any,
// is over; a create that failed stored nothing of ours to delete.
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
