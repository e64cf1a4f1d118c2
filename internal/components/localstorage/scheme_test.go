package localstorage

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// TestProvisionControllerLeavesSchemeAlone: building the library's
// controller while other goroutines decode with client-go's scheme, as a
// server's informers do, must not write that scheme (the runtime stops
// the process on a concurrent map read and write); other schemes still
// get core/v1.
func TestProvisionControllerLeavesSchemeAlone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for ctx.Err() == nil {
				if _, err := scheme.Scheme.New(corev1.SchemeGroupVersion.WithKind("Pod")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	client := fake.NewClientset()
	for range 200 {
		controller.NewProvisionController(ctx, client, ProvisionerName, &provisioner{client: client}, controller.LeaderElection(false))
	}
	cancel()
	readers.Wait()

	other := runtime.NewScheme()
	if err := corev1.AddToScheme(other); err != nil {
		t.Fatal(err)
	}
	if !other.Recognizes(corev1.SchemeGroupVersion.WithKind("Pod")) {
		t.Error("core/v1's AddToScheme no longer registers its types in another scheme")
	}
}
