package reliability

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestRollingRestartUnderLoad restarts every apiserver in turn (SIGTERM,
// then start) while Services are created and deleted, with an informer
// watching through the first apiserver. Clients only see requests they
// retried; the informer resumes its watch (or relists after 410 Gone, as
// client-go does) and ends up with exactly what is stored.
func TestRollingRestartUnderLoad(t *testing.T) {
	if !harness.InNetNS(t, addrs()...) {
		return
	}
	e, c := setUp(t)
	l := harness.NewLoad(clients(c))

	factory := informers.NewSharedInformerFactoryWithOptions(c.Client(0), 0, informers.WithNamespace("default"))
	svcInformer := factory.Core().V1().Services().Informer()
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, svcInformer.HasSynced) {
		t.Fatal("informer did not sync")
	}

	ctx, cancel := context.WithCancel(context.Background())
	loadDone := make(chan struct{})
	go func() {
		l.Run(ctx, 8)
		close(loadDone)
	}()
	for i := range 3 {
		time.Sleep(time.Second)
		l.Down[i].Store(true)
		if err := c.Server(i).Terminate(30 * time.Second); err != nil {
			t.Fatalf("stopping apiserver %d: %v", i, err)
		}
		c.Start(i)
		l.Down[i].Store(false)
	}
	time.Sleep(time.Second)
	cancel()
	<-loadDone

	l.Verify(t, c.Client(1))
	eventually(t, 30*time.Second, func(ctx context.Context) error {
		list, err := c.Client(1).CoreV1().Services("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		stored := map[string]string{}
		for _, s := range list.Items {
			stored[s.Name] = s.ResourceVersion
		}
		seen := map[string]string{}
		for _, obj := range svcInformer.GetStore().List() {
			s := obj.(*corev1.Service)
			seen[s.Name] = s.ResourceVersion
		}
		if len(seen) != len(stored) {
			return fmt.Errorf("informer holds %d Services, %d are stored", len(seen), len(stored))
		}
		for name, rv := range stored {
			if seen[name] != rv {
				return fmt.Errorf("informer has %s at resourceVersion %q, stored is %q", name, seen[name], rv)
			}
		}
		return nil
	})
	settled(t, c.Client(2), e)
}
