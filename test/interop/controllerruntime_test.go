package interop

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	crscheme "sigs.k8s.io/controller-runtime/pkg/scheme"

	"github.com/kubeboot/kubeboot/kubeboottest"
)

// The typed API of the Guestbook CRD in testdata/crds, written by hand as
// an operator's api/v1 package would be generated: structs with JSON tags,
// DeepCopy methods, and a SchemeBuilder.

var (
	guestbookGV   = schema.GroupVersion{Group: "interop.kubeboot.test", Version: "v1"}
	schemeBuilder = &crscheme.Builder{GroupVersion: guestbookGV}
)

func init() { schemeBuilder.Register(&Guestbook{}, &GuestbookList{}) }

type GuestbookSpec struct {
	Replicas int32 `json:"replicas"`
}

type GuestbookStatus struct {
	ObservedReplicas int32 `json:"observedReplicas,omitempty"`
}

type Guestbook struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GuestbookSpec   `json:"spec,omitempty"`
	Status GuestbookStatus `json:"status,omitempty"`
}

type GuestbookList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Guestbook `json:"items"`
}

func (in *Guestbook) DeepCopyInto(out *Guestbook) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
}

func (in *Guestbook) DeepCopy() *Guestbook {
	if in == nil {
		return nil
	}
	out := new(Guestbook)
	in.DeepCopyInto(out)
	return out
}

func (in *Guestbook) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *GuestbookList) DeepCopyInto(out *GuestbookList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Guestbook, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

func (in *GuestbookList) DeepCopy() *GuestbookList {
	if in == nil {
		return nil
	}
	out := new(GuestbookList)
	in.DeepCopyInto(out)
	return out
}

func (in *GuestbookList) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// guestbookReconciler keeps, for each Guestbook, a ConfigMap of the same
// name that it controls, with data replicas=<spec.replicas>, and reports
// the replicas it acted on in status.observedReplicas.
type guestbookReconciler struct {
	client   client.Client
	scheme   *runtime.Scheme
	recorder recorder.EventRecorder
}

func (r *guestbookReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var gb Guestbook
	if err := r.client.Get(ctx, req.NamespacedName, &gb); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !gb.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: gb.Name, Namespace: gb.Namespace}}
	op, err := controllerutil.CreateOrUpdate(ctx, r.client, cm, func() error {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data["replicas"] = strconv.Itoa(int(gb.Spec.Replicas))
		return controllerutil.SetControllerReference(&gb, cm, r.scheme)
	})
	if err != nil {
		return reconcile.Result{}, err
	}
	if op != controllerutil.OperationResultNone {
		r.recorder.Eventf(&gb, cm, corev1.EventTypeNormal, "ConfigMapSynced", "Sync",
			"ConfigMap %s %s with replicas=%d", cm.Name, op, gb.Spec.Replicas)
	}

	if gb.Status.ObservedReplicas != gb.Spec.Replicas {
		patch := client.MergeFrom(gb.DeepCopy())
		gb.Status.ObservedReplicas = gb.Spec.Replicas
		if err := r.client.Status().Patch(ctx, &gb, patch); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

const (
	pollTimeout  = 10 * time.Second
	leaseName    = "guestbook-interop"
	leaseNS      = metav1.NamespaceSystem
	controllerNS = "guestbooks"
)

// TestControllerRuntime runs a controller-runtime manager with a
// Guestbook controller against a kubeboot server, as an operator's test
// suite would with envtest.
func TestControllerRuntime(t *testing.T) {
	start := time.Now()
	srv := kubeboottest.Start(t, kubeboottest.Options{CRDDir: "testdata/crds"})
	t.Logf("server with CRDs ready in %s", time.Since(start).Round(time.Millisecond))

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := schemeBuilder.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}

	mgr, err := manager.New(srv.Config, manager.Options{
		Scheme:                        scheme,
		Logger:                        testr.NewWithOptions(t, testr.Options{Verbosity: 0}),
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              leaseName,
		LeaderElectionNamespace:       leaseNS,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		t.Fatalf("manager.New: %v", err)
	}
	r := &guestbookReconciler{client: mgr.GetClient(), scheme: scheme, recorder: mgr.GetEventRecorder("guestbook-controller")}
	if err := builder.ControllerManagedBy(mgr).For(&Guestbook{}).Owns(&corev1.ConfigMap{}).Complete(r); err != nil {
		t.Fatalf("building the controller: %v", err)
	}

	mgrCtx, stopMgr := context.WithCancel(context.Background())
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(mgrCtx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		stopMgr()
		select {
		case err := <-mgrDone:
			if err != nil {
				t.Errorf("manager stopped with %v", err)
			}
		case <-time.After(pollTimeout):
			t.Errorf("manager still running %s after its context was cancelled", pollTimeout)
		}
	}
	t.Cleanup(stop) // on an early t.Fatal; runs before the server's Stop

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The test's own client, uncached, as envtest suites build one.
	c, err := client.New(srv.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	// Leader election: the manager takes a coordination.k8s.io Lease and
	// only then starts the controller.
	select {
	case <-mgr.Elected():
	case err := <-mgrDone:
		t.Fatalf("manager stopped before it was elected: %v", err)
	case <-time.After(pollTimeout):
		t.Fatalf("manager not elected after %s", pollTimeout)
	}
	var lease coordinationv1.Lease
	if err := c.Get(ctx, types.NamespacedName{Namespace: leaseNS, Name: leaseName}, &lease); err != nil {
		t.Fatalf("getting the leader election Lease: %v", err)
	}
	if h := lease.Spec.HolderIdentity; h == nil || *h == "" || lease.Spec.RenewTime == nil {
		t.Fatalf("leader election Lease has no holder or renew time: %+v", lease.Spec)
	}
	t.Logf("elected: Lease %s/%s held by %q", leaseNS, leaseName, *lease.Spec.HolderIdentity)

	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controllerNS}}); err != nil {
		t.Fatal(err)
	}

	// The schema's minimum on spec.replicas is enforced, with the field
	// named in an Invalid error.
	bad := &Guestbook{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: controllerNS}, Spec: GuestbookSpec{Replicas: -2}}
	err = c.Create(ctx, bad)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.replicas") {
		t.Fatalf("creating a Guestbook with spec.replicas=-2: got %v, want an Invalid error naming spec.replicas", err)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		d := status.Status().Details
		if d == nil || len(d.Causes) == 0 || d.Causes[0].Field != "spec.replicas" {
			t.Errorf("Invalid error's details do not name spec.replicas as the field: %+v", d)
		}
	}

	// Create: the controller makes the ConfigMap and reports the status.
	gb := &Guestbook{ObjectMeta: metav1.ObjectMeta{Name: "frontend", Namespace: controllerNS}, Spec: GuestbookSpec{Replicas: 3}}
	if err := c.Create(ctx, gb); err != nil {
		t.Fatalf("creating Guestbook: %v", err)
	}
	key := client.ObjectKeyFromObject(gb)
	waitSynced(ctx, t, c, key, gb.UID, 3)

	// Update spec.replicas: the ConfigMap and the status follow.
	if err := c.Get(ctx, key, gb); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(gb.DeepCopy())
	gb.Spec.Replicas = 5
	if err := c.Patch(ctx, gb, patch); err != nil {
		t.Fatalf("patching spec.replicas: %v", err)
	}
	waitSynced(ctx, t, c, key, gb.UID, 5)

	// A writer without the status subresource cannot change the status:
	// an update of the main resource keeps the status the server has.
	if err := c.Get(ctx, key, gb); err != nil {
		t.Fatal(err)
	}
	gb.Status.ObservedReplicas = 9
	if err := c.Update(ctx, gb); err != nil {
		t.Fatalf("updating Guestbook: %v", err)
	}
	if gb.Status.ObservedReplicas != 5 {
		t.Errorf("an update of the main resource set status.observedReplicas to %d; the status subresource should keep 5", gb.Status.ObservedReplicas)
	}

	// Delete the ConfigMap by hand: the Owns watch brings the controller
	// back to recreate it.
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, key, cm); err != nil {
		t.Fatal(err)
	}
	oldUID := cm.UID
	if err := c.Delete(ctx, cm); err != nil {
		t.Fatalf("deleting the ConfigMap: %v", err)
	}
	poll(ctx, t, "the ConfigMap to be recreated", func() (bool, string) {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, key, cm); err != nil {
			return false, err.Error()
		}
		if cm.UID == oldUID {
			return false, "still the old ConfigMap"
		}
		return cm.Data["replicas"] == "5", fmt.Sprintf("data %v", cm.Data)
	})

	// A second Guestbook; the cache-backed client lists both, and the
	// uncached API reader with a metadata.name field selector only one.
	other := &Guestbook{ObjectMeta: metav1.ObjectMeta{Name: "backend", Namespace: controllerNS}, Spec: GuestbookSpec{Replicas: 1}}
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	waitSynced(ctx, t, c, client.ObjectKeyFromObject(other), other.UID, 1)
	poll(ctx, t, "the cached List to show both Guestbooks", func() (bool, string) {
		var list GuestbookList
		if err := mgr.GetClient().List(ctx, &list, client.InNamespace(controllerNS)); err != nil {
			return false, err.Error()
		}
		return names(list) == "backend,frontend", "cached List: " + names(list)
	})
	var selected GuestbookList
	if err := mgr.GetAPIReader().List(ctx, &selected, client.InNamespace(controllerNS), client.MatchingFields{"metadata.name": "frontend"}); err != nil {
		t.Fatalf("API reader List with field selector metadata.name=frontend: %v", err)
	}
	if names(selected) != "frontend" || selected.Items[0].Spec.Replicas != 5 || selected.Items[0].Status.ObservedReplicas != 5 {
		t.Errorf("API reader List with field selector metadata.name=frontend: got %q %+v", names(selected), selected.Items)
	}

	// The controller's Events, through the events.k8s.io/v1 API.
	poll(ctx, t, "the controller's Events", func() (bool, string) {
		var list eventsv1.EventList
		if err := c.List(ctx, &list, client.InNamespace(controllerNS)); err != nil {
			return false, err.Error()
		}
		var got []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Guestbook" && e.Regarding.Name == "frontend" && e.Reason == "ConfigMapSynced" {
				if e.ReportingController != "guestbook-controller" || e.Related == nil || e.Related.Kind != "ConfigMap" {
					return false, fmt.Sprintf("event %s: controller %q, related %+v", e.Name, e.ReportingController, e.Related)
				}
				return true, ""
			}
			got = append(got, e.Regarding.Kind+"/"+e.Regarding.Name+":"+e.Reason)
		}
		return false, fmt.Sprintf("events %v", got)
	})

	// Delete the Guestbook in the foreground. kubeboot runs no garbage
	// collector and its storage has garbage collection off (as
	// kube-apiserver with --enable-garbage-collector=false), so the server
	// adds no foregroundDeletion finalizer and the Guestbook goes at once;
	// the owned ConfigMap stays, and is not checked either way.
	if err := c.Delete(ctx, gb, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatalf("deleting the Guestbook: %v", err)
	}
	poll(ctx, t, "the Guestbook to be gone", func() (bool, string) {
		var got Guestbook
		err := c.Get(ctx, key, &got)
		return apierrors.IsNotFound(err), fmt.Sprintf("Get: %v; deletionTimestamp %v, finalizers %v", err, got.DeletionTimestamp, got.Finalizers)
	})
	if err := c.Get(ctx, key, &corev1.ConfigMap{}); err == nil {
		t.Logf("ConfigMap %s outlives its owner: no garbage collector", key)
	}
	poll(ctx, t, "the cached List to drop the Guestbook", func() (bool, string) {
		var list GuestbookList
		if err := mgr.GetClient().List(ctx, &list, client.InNamespace(controllerNS)); err != nil {
			return false, err.Error()
		}
		return names(list) == "backend", "cached List: " + names(list)
	})

	// A clean stop: Start returns nil, and the Lease is released.
	stop()
	if err := c.Get(ctx, types.NamespacedName{Namespace: leaseNS, Name: leaseName}, &lease); err != nil {
		t.Fatalf("getting the leader election Lease: %v", err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("Lease still held by %q after the manager stopped with LeaderElectionReleaseOnCancel", *h)
	}
	t.Logf("total %s", time.Since(start).Round(time.Millisecond))
}

// waitSynced waits until the Guestbook at key (of the given UID) has its
// ConfigMap with data replicas=<want>, controlled by it, and
// status.observedReplicas=<want>.
func waitSynced(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey, uid types.UID, want int32) {
	t.Helper()
	poll(ctx, t, fmt.Sprintf("%s to be synced at replicas=%d", key, want), func() (bool, string) {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, key, cm); err != nil {
			return false, "ConfigMap: " + err.Error()
		}
		if got := cm.Data["replicas"]; got != strconv.Itoa(int(want)) {
			return false, fmt.Sprintf("ConfigMap data %v", cm.Data)
		}
		ref := metav1.GetControllerOf(cm)
		if ref == nil || ref.APIVersion != guestbookGV.String() || ref.Kind != "Guestbook" || ref.Name != key.Name || ref.UID != uid ||
			ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			return false, fmt.Sprintf("ConfigMap ownerReferences %+v", cm.OwnerReferences)
		}
		var gb Guestbook
		if err := c.Get(ctx, key, &gb); err != nil {
			return false, "Guestbook: " + err.Error()
		}
		if gb.Status.ObservedReplicas != want {
			return false, fmt.Sprintf("status.observedReplicas %d", gb.Status.ObservedReplicas)
		}
		return true, ""
	})
}

// poll calls cond until it reports done, for at most pollTimeout; on
// timeout it fails the test with cond's last description of the state.
func poll(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		var done bool
		done, last = cond()
		return done, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last: %s", what, err, last)
	}
}

// names is the sorted, comma-separated names of the list's items.
func names(list GuestbookList) string {
	var n []string
	for _, gb := range list.Items {
		n = append(n, gb.Name)
	}
	sort.Strings(n)
	return strings.Join(n, ",")
}
