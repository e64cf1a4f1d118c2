// Package kubescheduler runs upstream's kube-scheduler 1.37.2 inside
// kubeboot's process (`kubeboot server`): its options, profiles and
// plugins, its leader election, talking to the apiserver in-process.
//
// What differs from the kube-scheduler binary, and why:
//   - Its clients come from a client configuration the caller gives (the
//     apiserver's in-process one for User), not from --kubeconfig.
//   - It serves no port of its own unless its --secure-port is set: its
//     metrics are in the process-wide registry the apiserver's /metrics
//     serves. With one, upstream's Run serves it, so only while this
//     scheduler leads, and it delegates authentication and authorization
//     to the apiserver through the kubeconfig the caller gives.
//   - Leader election is run here around upstream's Run, because on a
//     lost lease, and even on a requested stop, upstream's exits the
//     process. Here a stop returns, and a lost lease stops scheduling and
//     campaigns again; the apiserver in the same process keeps serving.
//     The scheduler's informers start once it leads (upstream's
//     DelayCacheUntilActive); in-process they sync in milliseconds.
package kubescheduler

import (
	"context"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/configz"
	"k8s.io/klog/v2"
	schedapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedconfig "k8s.io/kubernetes/cmd/kube-scheduler/app/config"
	schedoptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/profile"

	"github.com/kubeboot/kubeboot/internal/apiserver/loopback"
	"github.com/kubeboot/kubeboot/internal/components/election"
	"github.com/kubeboot/kubeboot/internal/platform/componentmetrics"
	"github.com/kubeboot/kubeboot/internal/platform/sharedobjects"
)

// User is the user kube-scheduler acts as, as in kubeadm's clusters; the
// RBAC bootstrap policy binds system:kube-scheduler and
// system:volume-scheduler to it.
const User = "system:kube-scheduler"

// configzName is the name upstream's Run registers its configuration
// under.
const configzName = "componentconfig"

// relaunchDelay is how long Run waits before campaigning again after
// scheduling stopped on a lost lease.
const relaunchDelay = time.Second

// In-process client limits (--kube-api-qps, --kube-api-burst; upstream's
// 50 and 100). The scheduler binds each Pod with one request, so
// upstream's limit caps scheduling at 50 Pods a second however fast the
// scheduler decides, a cap meant for a remote scheduler; in one process the
// apiserver's priority and fairness, which the loopback requests pass
// through, keeps the scheduler from flooding it (as for
// kube-controller-manager's in-process limits). These are what
// bench/nodes gives both control planes.
const (
	InProcessQPS   = 1000
	InProcessBurst = 2000
)

// NewOptions returns kube-scheduler's options with the defaults of running
// inside kubeboot: no port of its own (--secure-port 0), and, as k3s
// sets them and the CIS benchmark asks, no profiling and the loopback
// address should a port be given (--profiling=false,
// --bind-address=127.0.0.1).
func NewOptions() *schedoptions.Options {
	o := schedoptions.NewOptions()
	o.SecureServing.BindPort = 0
	o.SecureServing.BindAddress = net.IPv4(127, 0, 0, 1)
	o.Deprecated.EnableProfiling = false
	// What the flags show is what withDefaults runs with.
	o.Deprecated.QPS, o.Deprecated.Burst = InProcessQPS, InProcessBurst
	o.LeaderElection.RetryPeriod.Duration = election.DefaultRetryPeriod
	return o
}

// Validate checks opts as the kube-scheduler binary does, over the
// defaults Run starts from (with hostnameSpreading, HostnameSpreading).
func Validate(opts *schedoptions.Options, hostnameSpreading bool) error {
	o, err := withDefaults(opts, hostnameSpreading)
	if err != nil {
		return err
	}
	return utilerrors.NewAggregate(o.Validate())
}

// withDefaults is a copy of opts whose component configuration is the
// defaults, as upstream's Setup starts (but kubeboot's retry period and
// client limits, and with hostnameSpreading, HostnameSpreading): the flags and --config
// apply over them when the configuration is built.
func withDefaults(opts *schedoptions.Options, hostnameSpreading bool) (*schedoptions.Options, error) {
	defaults, err := latest.Default()
	if err != nil {
		return nil, err
	}
	defaults.LeaderElection.RetryPeriod.Duration = election.DefaultRetryPeriod
	defaults.EnableProfiling = false
	defaults.ClientConnection.QPS, defaults.ClientConnection.Burst = InProcessQPS, InProcessBurst
	if hostnameSpreading {
		for i := range defaults.Profiles {
			spreadByHostname(&defaults.Profiles[i])
		}
	}
	o := *opts
	o.ComponentConfig = defaults
	return &o, nil
}

// Run runs kube-scheduler with opts until ctx is done, its clients built
// from client (which authenticates as User). Its informers hold the Pods
// and Nodes they share with the process's other components through
// sharedObjects (nil: none shared). With hostnameSpreading, its default
// configuration spreads by hostname alone (HostnameSpreading). It returns
// nil once ctx is done and scheduling has stopped, or the error that kept
// it from starting.
func Run(ctx context.Context, opts *schedoptions.Options, hostnameSpreading bool, client *rest.Config, sharedObjects *sharedobjects.Pool) error {
	logger := klog.FromContext(ctx).WithName("kube-scheduler")
	ctx = klog.NewContext(ctx, logger)
	for {
		cc, sched, electionConfig, err := setup(ctx, opts, hostnameSpreading, client, sharedObjects)
		if err != nil {
			return err
		}
		run := func(ctx context.Context) {
			configz.Delete(configzName) // registered by the previous run, if any
			// Upstream's Run only returns an error once scheduling stopped.
			if err := schedapp.Run(ctx, cc, sched); err != nil && ctx.Err() == nil {
				logger.Error(err, "Scheduling stopped")
			}
		}
		if electionConfig == nil {
			run(ctx)
			return nil
		}
		if _, err := election.Run(ctx, *electionConfig, run); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		logger.Error(nil, "Leader election lost; campaigning again", "after", relaunchDelay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(relaunchDelay):
		}
	}
}

// setup is upstream's Setup on clients built from client: the completed
// configuration without leader election, the scheduler, and the leader
// election configuration (nil without --leader-elect).
func setup(ctx context.Context, opts *schedoptions.Options, hostnameSpreading bool, client *rest.Config, sharedObjects *sharedobjects.Pool) (
	*schedconfig.CompletedConfig, *scheduler.Scheduler, *election.Config, error) {
	o, err := withDefaults(opts, hostnameSpreading)
	if err != nil {
		return nil, nil, nil, err
	}
	// The binary builds its clients from --master or --kubeconfig; a host
	// keeps it from looking for an in-cluster configuration, and the
	// clients are replaced below.
	o.Master = client.Host
	o.Metrics = componentmetrics.OrNil(o.Metrics)
	if err := utilerrors.NewAggregate(o.Validate()); err != nil {
		return nil, nil, nil, err
	}
	c, err := o.Config(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	kubeconfig := loopback.WithClientSettings(client, c.KubeConfig)
	c.KubeConfig = kubeconfig
	if c.Client, err = kubernetes.NewForConfig(rest.AddUserAgent(kubeconfig, "scheduler")); err != nil {
		return nil, nil, nil, fmt.Errorf("kube-scheduler client: %w", err)
	}
	eventClient, err := kubernetes.NewForConfig(kubeconfig)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("kube-scheduler client: %w", err)
	}
	c.EventBroadcaster = events.NewEventBroadcasterAdapterWithContext(ctx, eventClient)
	c.InformerFactory = scheduler.NewInformerFactory(c.Client, 0, o.InformerName)
	// Upstream's pod informer drops managedFields; sharedObjects'
	// transforms do that too (for the Nodes as well) and share the Pods
	// and Nodes. The pod informer's watch leaves out finished Pods (a
	// field selector, upstream's newPodInformer's): its copies are shared
	// as a selected watch's.
	if err := c.InformerFactory.Core().V1().Pods().Informer().SetTransform(sharedObjects.Selected(unfinished)); err != nil {
		return nil, nil, nil, err
	}
	if err := c.InformerFactory.Core().V1().Nodes().Informer().SetTransform(sharedObjects.Transform); err != nil {
		return nil, nil, nil, err
	}
	dynClient, err := dynamic.NewForConfig(kubeconfig)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("kube-scheduler client: %w", err)
	}
	c.DynInformerFactory = dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynClient, 0, corev1.NamespaceAll, nil)

	var electionConfig *election.Config
	if le := c.ComponentConfig.LeaderElection; le.LeaderElect {
		profileName := corev1.DefaultSchedulerName
		if len(c.ComponentConfig.Profiles) > 0 {
			profileName = c.ComponentConfig.Profiles[0].SchedulerName
		}
		id, err := election.NewIdentity()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("kube-scheduler leader election: %w", err)
		}
		// The election's Events on a broadcaster of their own: upstream's
		// Run stops the scheduler's when it stops leading, before the
		// election records the lease's release.
		electionEvents := record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
		electionEvents.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: eventClient.CoreV1().Events("")})
		electionConfig = &election.Config{Name: "kube-scheduler", Election: le, Identity: id, Client: kubeconfig,
			Recorder:         electionEvents.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: profileName}),
			RecorderShutdown: electionEvents.Shutdown}
	}
	c.LeaderElection = nil
	c.ComponentConfig.LeaderElection.LeaderElect = false
	cc := c.Complete()

	sched, err := scheduler.New(ctx, cc.Client, cc.InformerFactory, cc.DynInformerFactory,
		profile.RecorderFactory(func(name string) events.EventRecorderLogger { return cc.EventBroadcaster.NewRecorder(name) }),
		scheduler.WithComponentConfigVersion(cc.ComponentConfig.TypeMeta.APIVersion),
		scheduler.WithKubeConfig(cc.KubeConfig),
		scheduler.WithProfiles(cc.ComponentConfig.Profiles...),
		scheduler.WithPercentageOfNodesToScore(cc.ComponentConfig.PercentageOfNodesToScore),
		scheduler.WithPodMaxBackoffSeconds(cc.ComponentConfig.PodMaxBackoffSeconds),
		scheduler.WithPodInitialBackoffSeconds(cc.ComponentConfig.PodInitialBackoffSeconds),
		scheduler.WithPodMaxInUnschedulablePodsDuration(cc.PodMaxInUnschedulablePodsDuration),
		scheduler.WithExtenders(cc.ComponentConfig.Extenders...),
		scheduler.WithParallelism(cc.ComponentConfig.Parallelism),
	)
	if err != nil {
		return nil, nil, nil, err
	}
	return &cc, sched, electionConfig, nil
}

// unfinished is the selector of upstream's pod informer,
// "status.phase!=Succeeded,status.phase!=Failed", as a predicate.
func unfinished(obj any) bool {
	pod, ok := obj.(*corev1.Pod)
	return ok && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}
