package clusterip

import (
	"context"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// writerFixture is a Writer on a fake client whose IPAddress creates wait
// for release, and the indexer its lister reads.
type writerFixture struct {
	w       *Writer
	client  *fake.Clientset
	stored  cache.Indexer
	release chan struct{}
	deletes chan string
}

func newWriterFixture(t *testing.T, createErr error) *writerFixture {
	t.Helper()
	f := &writerFixture{
		client:  fake.NewClientset(),
		stored:  cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		release: make(chan struct{}),
		deletes: make(chan string, 10),
	}
	f.client.PrependReactor("create", "ipaddresses", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-f.release
		if createErr != nil {
			return true, nil, createErr
		}
		return false, nil, nil
	})
	f.client.PrependReactor("delete", "ipaddresses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.deletes <- a.(k8stesting.DeleteAction).GetName()
		return false, nil, nil
	})
	f.w = NewWriter(f.client.NetworkingV1(), networkinglisters.NewIPAddressLister(f.stored))
	return f
}

// awaitResult runs Await in the background.
func awaitResult(w *Writer, ips ...string) <-chan error {
	out := make(chan error, 1)
	go func() { out <- w.Await(context.Background(), "ns/web", ips) }()
	return out
}

func TestWriterCreateAnswersBeforeTheCommitAndAwaitWaitsForIt(t *testing.T) {
	f := newWriterFixture(t, nil)
	ips := f.w.IPAddresses()
	if _, err := ips.Create(context.Background(), ipAddress("10.0.0.5", "uid-10.0.0.5", "web"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	// The same name again, while the first is being stored: taken.
	if _, err := ips.Create(context.Background(), ipAddress("10.0.0.5", "uid-10.0.0.5", "web"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second Create of a name in flight = %v, want AlreadyExists", err)
	}
	done := awaitResult(f.w, "10.0.0.9", "10.0.0.5")
	select {
	case err := <-done:
		t.Fatalf("Await returned %v before the IPAddress was stored", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(f.release)
	if err := <-done; err != nil {
		t.Fatalf("Await: %v", err)
	}
	if _, err := f.client.NetworkingV1().IPAddresses().Get(context.Background(), "10.0.0.5", metav1.GetOptions{}); err != nil {
		t.Fatalf("the IPAddress was not stored: %v", err)
	}
	// Stored but not yet seen by the lister: still taken.
	if _, err := ips.Create(context.Background(), ipAddress("10.0.0.5", "uid-10.0.0.5", "web"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("Create of a stored name the lister does not show yet = %v, want AlreadyExists", err)
	}
}

func TestWriterFailedCommitFailsAwaitAndReleaseDeletesNothing(t *testing.T) {
	taken := apierrors.NewAlreadyExists(networkingv1.Resource("ipaddresses"), "10.0.0.5")
	f := newWriterFixture(t, taken)
	close(f.release)
	if _, err := f.w.IPAddresses().Create(context.Background(), ipAddress("10.0.0.5", "uid-10.0.0.5", "web"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	err := f.w.Await(context.Background(), "ns/web", []string{"10.0.0.5"})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), taken.Error()) {
		t.Fatalf("Await = %v, want a Conflict saying %q", err, taken)
	}
	// The object under that name is another apiserver's: not ours to delete.
	if err := f.w.IPAddresses().Delete(context.Background(), "10.0.0.5", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	select {
	case name := <-f.deletes:
		t.Fatalf("Delete after a failed create deleted %s", name)
	default:
	}
}

func TestWriterDeleteWaitsForTheCreate(t *testing.T) {
	f := newWriterFixture(t, nil)
	if _, err := f.w.IPAddresses().Create(context.Background(), ipAddress("10.0.0.7", "uid-10.0.0.7", "web"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	deleted := make(chan error, 1)
	go func() {
		deleted <- f.w.IPAddresses().Delete(context.Background(), "10.0.0.7", metav1.DeleteOptions{})
	}()
	select {
	case <-f.deletes:
		t.Fatal("Delete reached the API before the create did")
	case <-time.After(50 * time.Millisecond):
	}
	close(f.release)
	if err := <-deleted; err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if name := <-f.deletes; name != "10.0.0.7" {
		t.Fatalf("deleted %s", name)
	}
}

func TestWriterCreatesANameTheListerShowsAtOnce(t *testing.T) {
	f := newWriterFixture(t, nil)
	close(f.release)
	// The Service's own ClusterIP, whose old IPAddress the lister still
	// shows: etcd decides, and the answer is the create's.
	if err := f.stored.Add(ipAddress("10.0.0.8", "uid-10.0.0.8", "web")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.NetworkingV1().IPAddresses().Create(context.Background(), ipAddress("10.0.0.8", "uid-10.0.0.8", "web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.w.IPAddresses().Create(context.Background(), ipAddress("10.0.0.8", "uid-10.0.0.8", "web"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("Create of a stored name = %v, want the API's AlreadyExists", err)
	}
	if err := f.w.Await(context.Background(), "ns/web", []string{"10.0.0.8"}); err != nil {
		t.Fatalf("Await of a name never written in the background = %v", err)
	}
}

// A Service deleted while another Service's create of its IP was in
// flight releases the IP: that must not hide from the other Service that
// its IPAddress was not stored (the IP would be held twice).
func TestWriterFailedCommitSurvivesAnotherOwnersRelease(t *testing.T) {
	taken := apierrors.NewAlreadyExists(networkingv1.Resource("ipaddresses"), "10.0.0.5")
	f := newWriterFixture(t, taken)
	if _, err := f.w.IPAddresses().Create(context.Background(), ipAddress("10.0.0.5", "uid-new", "web"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	released := make(chan error, 1)
	go func() {
		released <- f.w.IPAddresses().Delete(context.Background(), "10.0.0.5", metav1.DeleteOptions{})
	}()
	close(f.release)
	if err := <-released; err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := f.w.Await(context.Background(), "ns/web", []string{"10.0.0.5"}); !apierrors.IsConflict(err) {
		t.Fatalf("Await after another owner's release = %v, want a Conflict", err)
	}
	// Another Service's Await is not answered with web's failure.
	if err := f.w.Await(context.Background(), "ns/other", []string{"10.0.0.5"}); err != nil {
		t.Fatalf("Await of another owner = %v", err)
	}
}

// After a background create found its name taken, creates are synchronous
// for a while, so the MetaAllocator sees a taken name and tries the next
// IP, as upstream, instead of the Service create failing.
func TestWriterCreatesSynchronouslyAfterACollision(t *testing.T) {
	taken := apierrors.NewAlreadyExists(networkingv1.Resource("ipaddresses"), "10.0.0.5")
	f := newWriterFixture(t, taken)
	close(f.release)
	if _, err := f.w.IPAddresses().Create(context.Background(), ipAddress("10.0.0.5", "uid-1", "web"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("first Create = %v, want it answered before the commit", err)
	}
	if err := f.w.Await(context.Background(), "ns/web", []string{"10.0.0.5"}); !apierrors.IsConflict(err) {
		t.Fatalf("Await = %v, want a Conflict", err)
	}
	if _, err := f.w.IPAddresses().Create(context.Background(), ipAddress("10.0.0.6", "uid-2", "db"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("Create after a collision = %v, want the API's answer (AlreadyExists)", err)
	}
}
