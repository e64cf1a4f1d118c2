package failover

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeboot/kubeboot/bench/internal/benchserver"
	"github.com/kubeboot/kubeboot/test/harness"
)

// leaseDuration is the components' --leader-elect-lease-duration,
// upstream's default: a new leader takes over at most this long after
// the old one's last renewal, plus a retry period (2 s).
const leaseDuration = 15 * time.Second

// BenchmarkLeaderFailover: three `kubeboot server`s on embedded etcd
// (--cluster-init and two joins, each with a host name of its own), two
// simulated nodes on the first. Each iteration kill -9s the server
// holding the kube-controller-manager lease, at once creates a Deployment
// of three replicas through another, and times until its three Pods are
// created and scheduled; meanwhile a writer creates ConfigMaps through
// the survivors, every acknowledged one of which must be stored. The
// killed server then restarts on its data dir. It reports the median and
// maximum over the iterations, and how often the scheduler's lease was
// held by the same server.
func BenchmarkLeaderFailover(b *testing.B) {
	harness.RequireAddrs(b, harness.Addrs(0, 1, 2)...)
	bin, err := harness.Binary()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	root := b.TempDir()
	dir := func(i int) string { return filepath.Join(root, fmt.Sprint(i)) }
	hostname := func(i int) string { return fmt.Sprintf("server%d", i) }
	args := func(i int, extra ...string) []string {
		return append([]string{"--bind-address", harness.Addr(i), "--advertise-address", harness.Addr(i), "--secure-port", "6443",
			"--service-cluster-ip-range", "10.96.0.0/16", "--audit-policy-file=", "--etcd-disable-snapshots"}, extra...)
	}
	servers := make([]*harness.APIServer, 3)
	start := func(i int, extra ...string) {
		servers[i] = harness.StartReadyNamed(b, 2*time.Minute, bin, "server", hostname(i), dir(i), args(i, extra...)...)
	}
	start(0, "--cluster-init", "--simulated-nodes=2")
	token, err := os.ReadFile(filepath.Join(dir(0), "token"))
	if err != nil {
		b.Fatal(err)
	}
	for i := 1; i < 3; i++ {
		start(i, "--server", "https://"+harness.Addr(0)+":6443", "--token", strings.TrimSpace(string(token)))
	}
	clients := make([]kubernetes.Interface, 3)
	for i, s := range servers {
		clients[i] = s.MustClient(b)
	}
	holder := func(c kubernetes.Interface, lease string) int {
		l, err := c.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return -1
		}
		for i := range 3 {
			if strings.HasPrefix(*l.Spec.HolderIdentity, hostname(i)+"_") {
				return i
			}
		}
		return -1
	}

	var took, acquiredAfter []float64
	together := 0
	for n := range b.N {
		var leader, scheduler int
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			leader, scheduler = holder(clients[0], "kube-controller-manager"), holder(clients[0], "kube-scheduler")
			return leader >= 0 && scheduler >= 0, nil
		}); err != nil {
			b.Fatal("no server holds the kube-controller-manager and kube-scheduler leases")
		}
		if leader == scheduler {
			together++
		}
		survivors := slices.DeleteFunc([]int{0, 1, 2}, func(i int) bool { return i == leader })
		via := clients[survivors[0]]
		name := fmt.Sprintf("failover-%d", n)

		servers[leader].Kill()
		killed := time.Now()
		stop := make(chan struct{})
		var acknowledged []string
		var wg sync.WaitGroup
		wg.Go(func() { acknowledged = writeUntil(stop, clients, survivors, name) })
		if err := createDeployment(ctx, clients, survivors, name); err != nil {
			b.Fatal(err)
		}
		var created time.Duration
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			pods, err := via.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
			if err != nil || len(pods.Items) < 3 {
				return false, nil
			}
			if created == 0 {
				created = time.Since(killed)
			}
			for _, p := range pods.Items {
				if p.Spec.NodeName == "" {
					return false, nil
				}
			}
			return true, nil
		}); err != nil {
			b.Fatalf("the Pods of Deployment %s were not created and scheduled after server %d was killed", name, leader)
		}
		took = append(took, float64(time.Since(killed).Milliseconds()))
		var acquired time.Duration
		if l, err := via.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, "kube-controller-manager", metav1.GetOptions{}); err == nil && l.Spec.AcquireTime != nil {
			acquired = l.Spec.AcquireTime.Sub(killed)
		}
		acquiredAfter = append(acquiredAfter, float64(acquired.Milliseconds()))
		close(stop)
		wg.Wait()
		stored, err := via.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{LabelSelector: "writer=" + name})
		if err != nil {
			b.Fatal(err)
		}
		// A write that timed out may be stored too: what is checked is
		// that every acknowledged one is.
		names := map[string]bool{}
		for _, cm := range stored.Items {
			names[cm.Name] = true
		}
		for _, a := range acknowledged {
			if !names[a] {
				b.Fatalf("ConfigMap %s was acknowledged through a survivor and is not stored", a)
			}
		}
		b.Logf("run %d: killed server %d (scheduler on %d): its lease taken over after %d ms, Pods created after %d ms, scheduled after %.0f ms; %d writes acknowledged, all stored",
			n, leader, scheduler, acquired.Milliseconds(), created.Milliseconds(), took[len(took)-1], len(acknowledged))

		// A restart needs no join flags; the simulated nodes come back with
		// the first server.
		extra := []string{}
		if leader == 0 {
			extra = append(extra, "--simulated-nodes=2")
		}
		start(leader, extra...)
		clients[leader] = servers[leader].MustClient(b)
		if err := via.AppsV1().Deployments("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(benchserver.Median(took), "scheduled-ms")
	b.ReportMetric(slices.Max(took), "scheduled-max-ms")
	b.ReportMetric(slices.Min(took), "scheduled-min-ms")
	b.ReportMetric(benchserver.Median(acquiredAfter), "lease-taken-ms")
	b.ReportMetric(float64(together)/float64(b.N), "same-leader-share")
}

// createDeployment creates Deployment name of three replicas through the
// first survivor that takes it (etcd may be electing a new leader).
func createDeployment(ctx context.Context, clients []kubernetes.Interface, survivors []int, name string) error {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
	var err error
	for try := range 20 {
		i := survivors[try%len(survivors)]
		if _, err = clients[i].AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("creating Deployment %s through the survivors: %w", name, err)
}

// writeUntil creates ConfigMaps labelled writer=name through the
// survivors in turn until stop is closed, and returns the names of those
// acknowledged.
func writeUntil(stop <-chan struct{}, clients []kubernetes.Interface, survivors []int, name string) []string {
	var acknowledged []string
	for i := 0; ; i++ {
		select {
		case <-stop:
			return acknowledged
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Labels: map[string]string{"writer": name}}}
		if _, err := clients[survivors[i%len(survivors)]].CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err == nil {
			acknowledged = append(acknowledged, cm.Name)
		}
		cancel()
		time.Sleep(20 * time.Millisecond)
	}
}
