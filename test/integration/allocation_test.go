package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/etcd/etcdtest"
	"github.com/kubeboot/kubeboot/kubeboottest"
	"github.com/kubeboot/kubeboot/test/harness"
)

// TestAllocationAcrossAPIServers creates and deletes Services concurrently
// through three apiservers on one etcd, with small ranges so that workers
// contend for the same addresses and ports, and then checks every
// allocation against the Services: no ClusterIP or NodePort held twice,
// none held without a Service, none missing.
func TestAllocationAcrossAPIServers(t *testing.T) {
	e := etcdtest.Start(t)

	var clients []kubernetes.Interface
	for range 3 {
		srv := kubeboottest.Start(t, kubeboottest.Options{
			EtcdServers: e.Endpoints(),
			Configure: func(c *controlplane.Config) {
				c.ServiceClusterIPRange = "10.96.0.0/26" // 62 addresses, 16 kept for static
				c.ServiceNodePortRange = "30000-30079"   // 80 ports, 16 kept for static
				c.EndpointReconcilerType = "none"
			},
		})
		clients = append(clients, kubernetes.NewForConfigOrDie(srv.Config))
	}

	const workers, opsPerWorker = 24, 30
	ns := "default"
	var wg sync.WaitGroup
	var mu sync.Mutex
	refusals := map[string]int{}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range opsPerWorker {
				c := clients[rnd.IntN(len(clients))]
				name := fmt.Sprintf("w%d-%d", w, rnd.IntN(4))
				var err error
				if rnd.IntN(3) == 0 {
					err = c.CoreV1().Services(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
				} else {
					_, err = c.CoreV1().Services(ns).Create(context.Background(), randomService(rnd, name), metav1.CreateOptions{})
				}
				if err != nil {
					mu.Lock()
					refusals[string(apierrors.ReasonForError(err))]++
					mu.Unlock()
					// A full range is answered 500 "range is full" by
					// upstream's Service registry, as by kube-apiserver:
					// 24 workers share 62 addresses, so it happens here.
					full := apierrors.IsInternalError(err) && strings.HasSuffix(err.Error(), "range is full")
					if !full && (apierrors.IsInternalError(err) || apierrors.ReasonForError(err) == metav1.StatusReasonUnknown) {
						t.Errorf("op %d of worker %d: %v", i, w, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("refused operations by reason: %v", refusals)

	harness.CheckAllocations(t, clients[0], e.Client())
}

// randomService is a ClusterIP or NodePort Service, sometimes asking for a
// specific IP or port (often one another worker asks for too).
func randomService(rnd *rand.Rand, name string) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if rnd.IntN(3) == 0 {
		svc.Spec.ClusterIP = fmt.Sprintf("10.96.0.%d", 2+rnd.IntN(60))
	}
	if rnd.IntN(2) == 0 {
		svc.Spec.Type = corev1.ServiceTypeNodePort
		if rnd.IntN(3) == 0 {
			svc.Spec.Ports[0].NodePort = int32(30000 + rnd.IntN(80))
		}
	}
	return svc
}

// TestClusterIPCollisionsAcrossAPIServers fills a small range with
// Services created at once through two apiservers on one etcd, none
// asking for an IP: the two choose the same free IPs at the same moment,
// and every create must still succeed, with distinct IPs, as through
// kube-apiserver (the one that loses the race tries again).
func TestClusterIPCollisionsAcrossAPIServers(t *testing.T) {
	e := etcdtest.Start(t)
	var clients []kubernetes.Interface
	for range 2 {
		srv := kubeboottest.Start(t, kubeboottest.Options{
			EtcdServers: e.Endpoints(),
			Configure: func(c *controlplane.Config) {
				c.ServiceClusterIPRange = "10.96.0.0/27" // 14 addresses left for dynamic allocation
				c.EndpointReconcilerType = "none"
			},
		})
		clients = append(clients, kubernetes.NewForConfigOrDie(srv.Config))
	}
	ctx := context.Background()
	// The kubernetes Service holds 10.96.0.1, one of the 16 static ones.
	const services, rounds = 14, 3
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make([]error, services)
		for i := range services {
			wg.Go(func() {
				svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r%d-%d", round, i)},
					Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
				_, errs[i] = clients[i%2].CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, Service %d through apiserver %d: %v", round, i, i%2, err)
			}
		}
		list, err := clients[1].CoreV1().Services("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owner := map[string]string{}
		for _, svc := range list.Items {
			if other, taken := owner[svc.Spec.ClusterIP]; taken {
				t.Errorf("round %d: ClusterIP %s given to %s and %s", round, svc.Spec.ClusterIP, other, svc.Name)
			}
			owner[svc.Spec.ClusterIP] = svc.Name
		}
		for i := range services {
			if err := clients[0].CoreV1().Services("default").Delete(ctx, fmt.Sprintf("r%d-%d", round, i), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
	}
	// Nothing leaked: the retried creates' first IPs were released.
	var left []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		ips, err := clients[0].NetworkingV1().IPAddresses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		left = left[:0]
		for _, ip := range ips.Items {
			left = append(left, ip.Name)
		}
		return len(left) == 1, nil
	})
	if err != nil {
		t.Errorf("IPAddresses left with only the kubernetes Service: %v", left)
	}
}
