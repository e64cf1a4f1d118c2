package apiserver

import (
	"context"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/kubernetes/fake"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	api "k8s.io/kubernetes/pkg/apis/core"

	"github.com/kubeboot/kubeboot/internal/allocator/clusterip"
)

// recordingStorage records the keys of the objects stored.
type recordingStorage struct {
	storage.Interface
	created chan string
}

func (s recordingStorage) Create(_ context.Context, key string, _, _ runtime.Object, _ uint64) error {
	s.created <- key
	return nil
}

// GuaranteedUpdate runs tryUpdate once on an empty Service and records the
// key if it succeeded.
func (s recordingStorage) GuaranteedUpdate(_ context.Context, key string, _ runtime.Object, _ bool, _ *storage.Preconditions,
	tryUpdate storage.UpdateFunc, _ runtime.Object) error {
	if _, _, err := tryUpdate(&api.Service{}, storage.ResponseMeta{}); err != nil {
		return err
	}
	s.created <- key
	return nil
}

func TestServicesStorageWaitsForTheServiceIPAddresses(t *testing.T) {
	taken := apierrors.NewAlreadyExists(networkingv1.Resource("ipaddresses"), "10.0.0.5")
	for _, tc := range []struct {
		name      string
		update    bool
		createErr error
	}{
		{"create, stored", false, nil},
		{"create, taken by another apiserver", false, taken},
		{"update, stored", true, nil},
		{"update, taken by another apiserver", true, taken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			client := fake.NewClientset()
			client.PrependReactor("create", "ipaddresses", func(k8stesting.Action) (bool, runtime.Object, error) {
				<-release
				return tc.createErr != nil, nil, tc.createErr
			})
			writer := clusterip.NewWriter(client.NetworkingV1(),
				networkinglisters.NewIPAddressLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})))
			if _, err := writer.IPAddresses().Create(context.Background(), &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.0.0.5"},
				Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "web"}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			inner := recordingStorage{created: make(chan string, 1)}
			services := awaitingServices{Interface: inner, writer: writer}
			svc := &api.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
				Spec: api.ServiceSpec{ClusterIPs: []string{"10.0.0.5"}}}
			result := make(chan error, 1)
			go func() {
				result <- services.Create(context.Background(), "/services/specs/default/web", svc, &api.Service{}, 0)
			}()

			select {
			case key := <-inner.created:
				t.Fatalf("%s was stored before its IPAddress", key)
			case <-time.After(50 * time.Millisecond):
			}
			close(release)
			err := <-result
			if tc.createErr == nil {
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				if key := <-inner.created; key != "/services/specs/default/web" {
					t.Fatalf("stored %s", key)
				}
				return
			}
			if !apierrors.IsConflict(err) {
				t.Fatalf("Create = %v, want a Conflict", err)
			}
			select {
			case key := <-inner.created:
				t.Fatalf("%s was stored although its IPAddress was not", key)
			default:
			}
		})
	}
}
