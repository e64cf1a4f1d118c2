package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// Load creates and deletes Services (ClusterIP and NodePort) through
// several apiservers and remembers what each acknowledged. A request that
// failed without an answer (connection refused, timeout) is retried
// against another apiserver; its object's fate is then unknown until read
// back. Fault tests run it while they kill or restart apiservers, then
// Verify that nothing acknowledged was lost.
type Load struct {
	clients []kubernetes.Interface
	// Down marks apiservers the workers must avoid (one being stopped).
	Down []atomic.Bool

	mu      sync.Mutex
	want    map[string]bool // acknowledged: true = created, false = deleted
	unknown map[string]bool // a request for it got no answer
	retries atomic.Int64
	refused atomic.Int64 // 4xx answers (e.g. a random node port taken)
	// lastAck and longestGap time the acknowledged writes: the longest
	// stretch without one is how long writes were unavailable.
	lastAck    time.Time
	longestGap time.Duration
	gapStart   time.Time
}

// NewLoad is a Load through clients, one per apiserver.
func NewLoad(clients []kubernetes.Interface) *Load {
	return &Load{clients: clients, Down: make([]atomic.Bool, len(clients)), want: map[string]bool{}, unknown: map[string]bool{}}
}

// Run drives workers until ctx is done.
func (l *Load) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			var mine []string
			for seq := 0; ctx.Err() == nil; seq++ {
				if len(mine) > 0 && rnd.IntN(4) == 0 {
					i := rnd.IntN(len(mine))
					name := mine[i]
					mine = append(mine[:i], mine[i+1:]...)
					l.do(ctx, rnd, name, func(ctx context.Context, c kubernetes.Interface) error {
						return c.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{})
					}, false)
					continue
				}
				name := fmt.Sprintf("w%d-%d", w, seq)
				svc := &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: corev1.ServiceSpec{
						Selector: map[string]string{"app": name},
						Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
					},
				}
				if rnd.IntN(2) == 0 {
					svc.Spec.Type = corev1.ServiceTypeNodePort
				}
				if l.do(ctx, rnd, name, func(ctx context.Context, c kubernetes.Interface) error {
					_, err := c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
					return err
				}, true) {
					mine = append(mine, name)
				}
			}
		}()
	}
	wg.Wait()
}

// do sends a request, retrying elsewhere while it gets no answer, and
// records an acknowledged outcome. It reports whether it was acknowledged.
func (l *Load) do(ctx context.Context, rnd *rand.Rand, name string, req func(context.Context, kubernetes.Interface) error, create bool) bool {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		i := rnd.IntN(len(l.clients))
		if l.Down[i].Load() {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := req(rctx, l.clients[i])
		cancel()
		switch {
		case err == nil:
			l.record(name, create)
			return true
		case create && apierrors.IsAlreadyExists(err) && attempt > 0:
			// A retried create whose first attempt did land.
			l.record(name, true)
			return true
		case !create && apierrors.IsNotFound(err) && attempt > 0:
			l.record(name, false)
			return true
		case apierrors.IsInvalid(err) || apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err):
			l.refused.Add(1)
			return false
		}
		// No answer, or a 5xx: its fate is unknown until a retry gets an
		// answer; try again elsewhere.
		l.mu.Lock()
		l.unknown[name] = true
		l.mu.Unlock()
		l.retries.Add(1)
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

func (l *Load) record(name string, exists bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.want[name] = exists
	delete(l.unknown, name)
	now := time.Now()
	if !l.lastAck.IsZero() && now.Sub(l.lastAck) > l.longestGap {
		l.longestGap, l.gapStart = now.Sub(l.lastAck), l.lastAck
	}
	l.lastAck = now
}

// LongestGap is the longest time between two acknowledged writes, and
// when it began: how long, at most, the servers took no write.
func (l *Load) LongestGap() (time.Duration, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.longestGap, l.gapStart
}

// Verify checks that every acknowledged create is stored and every
// acknowledged delete is gone.
func (l *Load) Verify(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	list, err := client.CoreV1().Services("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, s := range list.Items {
		have[s.Name] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lost, resurrected, created := 0, 0, 0
	for name, exists := range l.want {
		if l.unknown[name] {
			// A later request for it got no answer (e.g. a delete cut
			// off when the load stopped): either outcome is correct.
			continue
		}
		if exists {
			created++
		}
		switch {
		case exists && !have[name]:
			lost++
			t.Errorf("acknowledged create of %s is lost", name)
		case !exists && have[name]:
			resurrected++
			t.Errorf("acknowledged delete of %s did not stick", name)
		}
	}
	t.Logf("load: %d acknowledged writes (%d Services expected), %d lost, %d deletes undone, %d retried requests, %d refused, %d of unknown fate",
		len(l.want), created, lost, resurrected, l.retries.Load(), l.refused.Load(), len(l.unknown))
}
