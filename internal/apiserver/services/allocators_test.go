package services

import (
	"context"
	"net"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	api "k8s.io/kubernetes/pkg/apis/core"

	"github.com/kubeboot/kubeboot/internal/apiserver/services/clusterip"
)

// recordingStorage records the keys of the objects stored, and whether
// the IPAddress 10.0.0.5 existed when each was.
type recordingStorage struct {
	storage.Interface
	client *fake.Clientset
	stored map[string]bool
}

func (s recordingStorage) store(key string) {
	_, err := s.client.NetworkingV1().IPAddresses().Get(context.Background(), "10.0.0.5", metav1.GetOptions{})
	s.stored[key] = err == nil
}

func (s recordingStorage) Create(_ context.Context, key string, _, _ runtime.Object, _ uint64) error {
	s.store(key)
	return nil
}

// GuaranteedUpdate runs tryUpdate once on a Service and records the key
// if it succeeded.
func (s recordingStorage) GuaranteedUpdate(_ context.Context, key string, _ runtime.Object, _ bool, _ *storage.Preconditions,
	tryUpdate storage.UpdateFunc, _ runtime.Object) error {
	if _, _, err := tryUpdate(&api.Service{}, storage.ResponseMeta{}); err != nil {
		return err
	}
	s.store(key)
	return nil
}

func TestServicesStorageStoresTheIPAddressesFirst(t *testing.T) {
	taken := apierrors.NewAlreadyExists(networkingv1.Resource("ipaddresses"), "10.0.0.5")
	for _, tc := range []struct {
		name      string
		update    bool
		createErr error
	}{
		{"create", false, nil},
		{"create, taken by another apiserver", false, taken},
		{"update", true, nil},
		{"update, taken by another apiserver", true, taken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(&networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
				Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.0.0.0/24"}}})
			client.PrependReactor("create", "ipaddresses", func(k8stesting.Action) (bool, runtime.Object, error) {
				return tc.createErr != nil, nil, tc.createErr
			})
			factory := informers.NewSharedInformerFactory(client, 0)
			a, err := clusterip.NewAllocator(api.IPv4Protocol, factory.Networking().V1().ServiceCIDRs(),
				factory.Networking().V1().IPAddresses(), client.NetworkingV1().IPAddresses())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer factory.Shutdown()
			defer cancel()
			factory.Start(ctx.Done())
			if !cache.WaitForCacheSync(ctx.Done(), a.HasSynced) {
				t.Fatal("allocator did not sync")
			}
			if err := a.Allocate(net.ParseIP("10.0.0.5")); err != nil {
				t.Fatal(err)
			}

			inner := recordingStorage{client: client, stored: map[string]bool{}}
			services := recordingServices{Interface: inner, allocators: clusterIPAllocators{api.IPv4Protocol: a}}
			svc := &api.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
				Spec: api.ServiceSpec{ClusterIPs: []string{"10.0.0.5"}}}
			const key = "/services/specs/default/web"
			if tc.update {
				err = services.GuaranteedUpdate(ctx, key, &api.Service{}, false, nil,
					func(runtime.Object, storage.ResponseMeta) (runtime.Object, *uint64, error) { return svc, nil, nil }, nil)
			} else {
				err = services.Create(ctx, key, svc, &api.Service{}, 0)
			}
			if tc.createErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if withIP, stored := inner.stored[key]; !stored || !withIP {
					t.Fatalf("Service stored %v, with its IPAddress %v", stored, withIP)
				}
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("storing = %v, want kube-apiserver's Invalid for a requested IP another apiserver took", err)
			}
			if _, stored := inner.stored[key]; stored {
				t.Fatalf("%s was stored although its IPAddress was not", key)
			}
		})
	}
}
