package identitylease_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/internal/controller/identitylease"
	"github.com/kubeboot/kubeboot/kubeboottest"
)

// One server for the package; each test uses leases of its own names. The
// server's own collector ran at start and runs again only after an hour.
var (
	client     kubernetes.Interface
	restConfig *rest.Config
)

func TestMain(m *testing.M) {
	kubeboottest.Main(kubeboottest.Options{}, func(srv *kubeboottest.Server) int { return runTests(m, srv) })
}

// runTests sets up what the tests share on srv and runs them.
func runTests(m *testing.M, srv *kubeboottest.Server) int {
	restConfig = srv.Config
	client = kubernetes.NewForConfigOrDie(restConfig)
	// The server's identity lease controller and collector start together,
	// in the background; once its lease exists, their first passes are
	// over (the collector's is one list) and cannot race the tests.
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoordinationV1().Leases(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: identitylease.IdentityLabel})
		return err == nil && len(list.Items) > 0, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "the server published no identity lease:", err)
		return 1
	}
	return m.Run()
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func leases() typedcoordinationv1.LeaseInterface {
	return client.CoordinationV1().Leases(metav1.NamespaceSystem)
}

func getLease(t *testing.T, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := leases().Get(ctxFor(t), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var identityLabels = map[string]string{identitylease.IdentityLabel: identitylease.IdentityLabelValue}

var runs atomic.Int32

// uniq makes names unique per run of a test, so that -count=N reuses the
// one server.
func uniq(name string) string { return fmt.Sprintf("%s-%d", name, runs.Add(1)) }

// The server publishes its own identity lease, as kube-apiserver does.
func TestServerLease(t *testing.T) {
	list, err := client.CoordinationV1().Leases(metav1.NamespaceSystem).List(ctxFor(t), metav1.ListOptions{LabelSelector: identitylease.IdentityLabel + "=" + identitylease.IdentityLabelValue})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) == 0 {
		t.Fatal("no identity lease for the server")
	}
	l := list.Items[0]
	if !strings.HasPrefix(l.Name, "apiserver-") || !strings.HasPrefix(*l.Spec.HolderIdentity, l.Name+"_") {
		t.Errorf("server lease %s holder %s", l.Name, *l.Spec.HolderIdentity)
	}
}

// Start publishes Lease <ID> in kube-system with holder <ID>_<uuid>, the
// identity and hostname labels and the peer address, and renews it.
func TestStartPublishes(t *testing.T) {
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	id := uniq("apiserver-test-publish")
	identitylease.Start(ctx, client, identitylease.Config{
		ID:            id,
		PeerAddress:   "198.51.100.5:6443",
		RenewInterval: 50 * time.Millisecond,
		GCPeriod:      time.Hour,
	})
	var l *coordinationv1.Lease
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		l = getLease(t, id)
		return l != nil, nil
	})
	if err != nil {
		t.Fatal("lease not created")
	}
	holder := ptr.Deref(l.Spec.HolderIdentity, "")
	suffix, ok := strings.CutPrefix(holder, id+"_")
	if !ok {
		t.Errorf("holder = %q, want %s_<uuid>", holder, id)
	} else if _, err := uuid.Parse(suffix); err != nil {
		t.Errorf("holder suffix %q is not a UUID: %v", suffix, err)
	}
	if got := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); got != identitylease.DefaultDurationSeconds {
		t.Errorf("leaseDurationSeconds = %d, want %d", got, identitylease.DefaultDurationSeconds)
	}
	host, _ := os.Hostname()
	if l.Labels[identitylease.IdentityLabel] != identitylease.IdentityLabelValue || l.Labels[identitylease.HostnameLabel] != host {
		t.Errorf("labels = %v, want %s=%s and %s=%s", l.Labels, identitylease.IdentityLabel, identitylease.IdentityLabelValue, identitylease.HostnameLabel, host)
	}
	if got := l.Annotations[identitylease.PeerAddressAnnotation]; got != "198.51.100.5:6443" {
		t.Errorf("annotation %s = %q", identitylease.PeerAddressAnnotation, got)
	}
	if l.Spec.RenewTime == nil {
		t.Fatal("no renewTime")
	}
	first := l.Spec.RenewTime.Time
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		cur := getLease(t, id)
		return cur.Spec.RenewTime.After(first), nil
	})
	if err != nil {
		t.Error("lease not renewed")
	}
	if again := getLease(t, id); ptr.Deref(again.Spec.HolderIdentity, "") != holder {
		t.Errorf("holder changed on renewal: %q -> %q", holder, ptr.Deref(again.Spec.HolderIdentity, ""))
	}
}

func createLease(t *testing.T, name string, labels map[string]string, renewed *time.Time, duration *int32) *coordinationv1.Lease {
	t.Helper()
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem, Labels: labels},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(name + "_" + uuid.NewString()),
			LeaseDurationSeconds: duration,
		},
	}
	if renewed != nil {
		l.Spec.RenewTime = &metav1.MicroTime{Time: *renewed}
	}
	got, err := leases().Create(ctxFor(t), l, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// The collector deletes expired identity leases, and only those.
func TestCollect(t *testing.T) {
	now := time.Now()
	ago := func(d time.Duration) *time.Time { tm := now.Add(-d); return &tm }
	tests := []struct {
		name        string
		labels      map[string]string
		renewed     *time.Time
		duration    *int32
		wantDeleted bool
	}{
		{name: "gc-expired", labels: identityLabels, renewed: ago(2 * time.Hour), duration: ptr.To[int32](3600), wantDeleted: true},
		{name: "gc-just-expired", labels: identityLabels, renewed: ago(11 * time.Second), duration: ptr.To[int32](10), wantDeleted: true},
		{name: "gc-fresh", labels: identityLabels, renewed: ago(time.Minute), duration: ptr.To[int32](3600)},
		{name: "gc-not-yet-expired", labels: identityLabels, renewed: ago(9 * time.Second), duration: ptr.To[int32](10)},
		{name: "gc-no-renew-time", labels: identityLabels, duration: ptr.To[int32](3600), wantDeleted: true},
		{name: "gc-no-duration", labels: identityLabels, renewed: ago(time.Second), wantDeleted: true},
		{name: "gc-expired-without-label", renewed: ago(2 * time.Hour), duration: ptr.To[int32](3600)},
		{name: "gc-expired-other-identity", labels: map[string]string{identitylease.IdentityLabel: "kube-controller-manager"}, renewed: ago(2 * time.Hour), duration: ptr.To[int32](3600)},
	}
	for i := range tests {
		tests[i].name = uniq(tests[i].name)
		createLease(t, tests[i].name, tests[i].labels, tests[i].renewed, tests[i].duration)
	}
	if err := identitylease.Collect(ctxFor(t), client, now); err != nil {
		t.Fatalf("collect: %v", err)
	}
	for _, tc := range tests {
		if deleted := getLease(t, tc.name) == nil; deleted != tc.wantDeleted {
			t.Errorf("lease %s: deleted=%v, want %v", tc.name, deleted, tc.wantDeleted)
		}
	}
	// The server's own lease is fresh.
	list, err := client.CoordinationV1().Leases(metav1.NamespaceSystem).List(ctxFor(t), metav1.ListOptions{LabelSelector: identitylease.IdentityLabel + "=" + identitylease.IdentityLabelValue})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range list.Items {
		found = found || strings.HasPrefix(l.Name, "apiserver-")
	}
	if !found {
		t.Error("the collector deleted the server's own fresh lease")
	}
	// Nothing left to do: a second pass succeeds.
	if err := identitylease.Collect(ctxFor(t), client, now); err != nil {
		t.Fatalf("second collect: %v", err)
	}
}

// renewOnGet renews lease name (through client) just before the collector's
// client reads it, as if its apiserver renewed it between the collector's
// list and its delete.
type renewOnGet struct {
	name    string
	next    http.RoundTripper
	renewed atomic.Bool
	t       *testing.T
}

func (r *renewOnGet) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/leases/"+r.name) && !r.renewed.Load() {
		l, err := leases().Get(req.Context(), r.name, metav1.GetOptions{})
		if err == nil {
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			_, err = leases().Update(req.Context(), l, metav1.UpdateOptions{})
		}
		if err != nil {
			r.t.Errorf("renewing %s: %v", r.name, err)
		}
		r.renewed.Store(true)
	}
	return r.next.RoundTrip(req)
}

// The collector re-reads a lease before deleting it: one renewed since the
// list survives.
func TestCollectRereads(t *testing.T) {
	name := uniq("gc-renewed-meanwhile")
	createLease(t, name, identityLabels, ptr.To(time.Now().Add(-2*time.Hour)), ptr.To[int32](3600))
	cfg := rest.CopyConfig(restConfig)
	hook := &renewOnGet{name: name, t: t}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { hook.next = rt; return hook })
	if err := identitylease.Collect(ctxFor(t), kubernetes.NewForConfigOrDie(cfg), time.Now()); err != nil {
		t.Fatalf("collect: %v", err)
	}
	if !hook.renewed.Load() {
		t.Fatal("the collector never read the lease before deciding")
	}
	if getLease(t, name) == nil {
		t.Error("a lease renewed before the delete was deleted")
	}
}

// Start's collector runs every GCPeriod.
func TestStartCollects(t *testing.T) {
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	name, id := uniq("gc-by-start"), uniq("apiserver-test-collects")
	identitylease.Start(ctx, client, identitylease.Config{ID: id, RenewInterval: time.Hour, GCPeriod: 50 * time.Millisecond})
	createLease(t, name, identityLabels, ptr.To(time.Now().Add(-2*time.Hour)), ptr.To[int32](3600))
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return getLease(t, name) == nil, nil
	})
	if err != nil {
		t.Error("expired lease not collected by Start's loop")
	}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return getLease(t, id) != nil, nil
	})
	if err != nil {
		t.Fatal("identity lease not created")
	}
	if l := getLease(t, id); l.Annotations[identitylease.PeerAddressAnnotation] != "" {
		t.Errorf("peer address annotation set without a peer address: %v", l.Annotations)
	}
}
