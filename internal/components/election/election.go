// Package election runs the leader election of kubeboot's in-process
// components (kube-controller-manager, kube-scheduler) the way their
// binaries do, once for both: a lease in kube-system named for the
// component, an identity new for every run, and leading work that is
// waited for before the election returns.
package election

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/klog/v2"
)

// DefaultRetryPeriod is kubeboot's default --leader-elect-retry-period for
// the controller manager and the scheduler, instead of upstream's 2 s. A
// candidate counts a lease's age from the first look at which it saw the
// holder's last renewal, and takes the lease at its first look past the
// lease duration; with looks every 0.5-1.1 s (client-go's jitter) a killed
// leader is replaced within the lease duration plus at most about 1.7 s,
// not 4.4 s. Cost: each leader renews its Lease twice a second.
const DefaultRetryPeriod = 500 * time.Millisecond

// Config is one component's leader election.
type Config struct {
	// Name is the component's, which its errors and logs name.
	Name string
	// Election is the component's leader election configuration
	// (--leader-elect-lease-duration, --leader-elect-resource-name, ...).
	Election componentbaseconfig.LeaderElectionConfiguration
	// Identity is this run's holder identity (NewIdentity).
	Identity string
	// Client reaches the apiserver; Recorder records the election's
	// events.
	Client   *rest.Config
	Recorder resourcelock.EventRecorder
	// RecorderShutdown, if set, shuts Recorder's broadcaster down; Run
	// calls it once it has recorded the lease's release. A component's
	// own broadcaster stops with its work, before the release.
	RecorderShutdown func()
	// WatchDog, if set, fails the component's /healthz once its lease is
	// overdue.
	WatchDog *leaderelection.HealthzAdaptor
	// Coordinated is coordinated leader election (the
	// CoordinatedLeaderElection feature): the lease's holder is picked by
	// the apiserver among the candidates.
	Coordinated bool
}

// NewIdentity is a holder identity as the components' binaries make one:
// the host name and a UUID, new for every run, so that a restarted
// component does not resume a lease its previous run held.
func NewIdentity() (string, error) {
	hostname, err := os.Hostname()
	if err != nil {
		return "", err
	}
	return hostname + "_" + string(uuid.NewUUID()), nil
}

// Run campaigns for the lease and runs lead while it holds it, until ctx
// is done or the lease is lost; the lease is released when ctx is done.
// It returns only once lead has returned too (client-go's elector starts
// lead in a goroutine of its own and does not wait for it), and reports
// whether lead ran. When lead returns on its own, the lease is released
// and Run returns.
func Run(ctx context.Context, c Config, lead func(context.Context)) (led bool, _ error) {
	if c.RecorderShutdown != nil {
		defer c.RecorderShutdown()
	}
	le := c.Election
	lock, err := newLock(c)
	if err != nil {
		return false, fmt.Errorf("%s leader election: %w", c.Name, err)
	}
	held := &Held{Interface: lock}
	logger := klog.FromContext(ctx)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          held,
		LeaseDuration: le.LeaseDuration.Duration,
		RenewDeadline: le.RenewDeadline.Duration,
		RetryPeriod:   le.RetryPeriod.Duration,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				defer close(done)
				defer stop()
				lead(ctx)
			},
			OnStoppedLeading: func() { logger.Info("Stopped leading", "lease", held.Describe()) },
		},
		WatchDog:        c.WatchDog,
		ReleaseOnCancel: true,
		Name:            c.Name,
		Coordinated:     c.Coordinated,
	})
	if err != nil {
		return false, fmt.Errorf("%s leader election: %w", c.Name, err)
	}
	if c.WatchDog != nil {
		c.WatchDog.SetLeaderElection(elector)
	}
	elector.Run(ctx)
	if !held.Acquired() {
		return false, nil
	}
	<-done
	return true, nil
}

// newLock is c's lease lock, as client-go's NewFromKubeconfig makes one
// but for its requests' timeout: a request may take the whole renew
// deadline, not half of it. Upstream halves it so that a renewal stuck on
// a dead connection is retried on a new one within the deadline; the
// components here reach their apiserver in-process, where a timed-out
// request only joins the same queue again behind a second read of the
// lease. Under load (5,000 simulated nodes with Pods being created, on
// two cores: single writes up to 8 s, mostly in etcd's queue) half the
// deadline lost every component's lease at once (decisions.md). The
// elector's renew deadline still bounds each renewal.
func newLock(c Config) (resourcelock.Interface, error) {
	config := rest.CopyConfig(c.Client)
	config.Timeout = c.Election.RenewDeadline.Duration
	client, err := kubernetes.NewForConfig(rest.AddUserAgent(config, "leader-election"))
	if err != nil {
		return nil, err
	}
	le := c.Election
	return resourcelock.New(le.ResourceLock, le.ResourceNamespace, le.ResourceName, client.CoreV1(), client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: c.Identity, EventRecorder: c.Recorder})
}

// Delays between a component's runs under Lead: a run that fails is
// retried after minRetry, doubling up to maxRetry while runs keep
// failing soon after they start.
const (
	minRetry = time.Second
	maxRetry = time.Minute
)

// Lead runs lead while this process holds c's lease (or at once and
// always, without c.Election.LeaderElect), until ctx is done: when the
// lease is lost, or lead fails, it campaigns again after a delay that
// grows while runs keep failing. lead's errors are logged: the component
// is an addition the server runs on without (resource metrics, Helm
// charts), not one whose loss should stop it. c.Identity, if empty, is a
// new one (NewIdentity).
func Lead(ctx context.Context, c Config, lead func(context.Context) error) {
	logger := klog.FromContext(ctx)
	delay := minRetry
	for {
		started := time.Now()
		err := campaign(ctx, c, lead)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > maxRetry {
			delay = minRetry
		}
		if err != nil {
			logger.Error(err, "Stopped; starting again", "component", c.Name, "after", delay)
		} else {
			logger.Info("Leader election lost; campaigning again", "component", c.Name, "after", delay)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, maxRetry)
	}
}

// campaign runs lead once: while holding the lease, or at once without
// leader election.
func campaign(ctx context.Context, c Config, lead func(context.Context) error) error {
	if !c.Election.LeaderElect {
		return lead(ctx)
	}
	if c.Identity == "" {
		id, err := NewIdentity()
		if err != nil {
			return err
		}
		c.Identity = id
	}
	var led error
	if _, err := Run(ctx, c, func(ctx context.Context) { led = lead(ctx) }); err != nil {
		return err
	}
	return led
}
