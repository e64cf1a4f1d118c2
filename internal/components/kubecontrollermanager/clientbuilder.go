package kubecontrollermanager

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/controller-manager/pkg/clientbuilder"
	"k8s.io/klog/v2"
)

// clientBackoff spaces a controller's client construction retries: about
// 6 s in all, longer than an etcd leader election, bounded so that an
// error that persists still fails the start.
var clientBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 6, Cap: 2 * time.Second}

// retryingClientBuilder retries the client construction of the builder
// it wraps while the API answers with a transient error. Upstream's
// service-account builder reads (or creates) each controller's
// ServiceAccount as it builds its client, and one failed read fails the
// controllers' start: the binary exits, to be restarted by its
// supervisor. Here that stops the whole server with its etcd member, so
// a new leader starting its controllers during an etcd leader change
// ("etcdserver: leader changed", a 500) would take a second member of
// its cluster down.
type retryingClientBuilder struct {
	builder clientbuilder.ControllerClientBuilder
	ctx     context.Context
	backoff wait.Backoff
}

var _ clientbuilder.ControllerClientBuilder = retryingClientBuilder{}

// transient reports whether err is the API's answer to a request that
// may succeed if sent again unchanged.
func transient(err error) bool {
	return apierrors.IsInternalError(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err)
}

// retry calls build until it succeeds, fails with an error that is not
// transient, or the backoff ends, and returns its last answer. It calls
// build at least once, as upstream's builder would be called, even when
// b.ctx is done (a controller starting as the server stops), and only
// stops retrying then.
func retry[T any](b retryingClientBuilder, name string, build func(string) (T, error)) (T, error) {
	backoff := b.backoff
	for {
		out, err := build(name)
		if err == nil || !transient(err) || backoff.Steps <= 1 {
			return out, err
		}
		klog.FromContext(b.ctx).V(2).Info("Building a controller's client failed, will retry", "controller", name, "err", err)
		select {
		case <-b.ctx.Done():
			return out, err
		case <-time.After(backoff.Step()):
		}
	}
}

func (b retryingClientBuilder) Config(name string) (*rest.Config, error) {
	return retry(b, name, b.builder.Config)
}

func (b retryingClientBuilder) Client(name string) (kubernetes.Interface, error) {
	return retry(b, name, b.builder.Client)
}

func (b retryingClientBuilder) DiscoveryClient(name string) (discovery.DiscoveryInterface, error) {
	return retry(b, name, b.builder.DiscoveryClient)
}

// The OrDie forms exit as upstream's builders do.

func (b retryingClientBuilder) ConfigOrDie(name string) *rest.Config {
	c, err := b.Config(name)
	if err != nil {
		klog.Fatal(err)
	}
	return c
}

func (b retryingClientBuilder) ClientOrDie(name string) kubernetes.Interface {
	c, err := b.Client(name)
	if err != nil {
		klog.Fatal(err)
	}
	return c
}

func (b retryingClientBuilder) DiscoveryClientOrDie(name string) discovery.DiscoveryInterface {
	c, err := b.DiscoveryClient(name)
	if err != nil {
		klog.Fatal(err)
	}
	return c
}
