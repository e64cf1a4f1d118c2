// Package kubecontrollermanager runs upstream's kube-controller-manager
// 1.37.2 inside kubeboot's process (`kubeboot server`): its options, its
// controllers, its leader election, talking to the apiserver in-process.
//
// What differs from the kube-controller-manager binary, and why:
//   - Its clients come from a client configuration the caller gives (the
//     apiserver's in-process one for User), not from --kubeconfig.
//   - It serves no port of its own unless its --secure-port is set: its
//     metrics are in the process-wide registry the apiserver's /metrics
//     serves. With one, that port delegates authentication and
//     authorization to the apiserver through the kubeconfig the caller
//     gives (--authentication-kubeconfig, --authorization-kubeconfig).
//   - Logging, feature gates and signals belong to the process: Run
//     neither configures logging nor installs a signal handler.
//   - The leader election is run here, around upstream's controllers,
//     because upstream's Run builds informers of its own: these share
//     their Pods and Nodes with the process's other components
//     (internal/platform/sharedobjects). Leader migration, which needs a second
//     lease and a cloud-controller-manager, is refused.
//   - A lost leader lease stops its controllers and Run returns an error,
//     where the binary exits at once: the caller stops its other servers
//     gracefully (the apiserver drains) before the process exits.
//   - A controller's client whose ServiceAccount read fails on a
//     transient API error (an etcd leader change) is built again for a
//     few seconds before the start fails: a failed start stops the whole
//     server, its etcd member with it, not one binary.
//   - Nothing is registered process-wide (configz), so that several
//     control planes in one process (tests) can each run theirs.
package kubecontrollermanager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	cliflag "k8s.io/component-base/cli/flag"

	"github.com/blang/semver/v4"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/server/mux"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/record"
	basecompatibility "k8s.io/component-base/compatibility"
	genericcontrollermanager "k8s.io/controller-manager/app"
	cmconfig "k8s.io/controller-manager/config"
	"k8s.io/controller-manager/pkg/clientbuilder"
	controllerhealthz "k8s.io/controller-manager/pkg/healthz"
	"k8s.io/klog/v2"
	cmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmconfig "k8s.io/kubernetes/cmd/kube-controller-manager/app/config"
	cmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
	kubefeatures "k8s.io/kubernetes/pkg/features"

	"github.com/kubeboot/kubeboot/internal/apiserver/loopback"
	"github.com/kubeboot/kubeboot/internal/components/election"
	"github.com/kubeboot/kubeboot/internal/platform/componentmetrics"
	"github.com/kubeboot/kubeboot/internal/platform/sharedobjects"
)

// User is the user kube-controller-manager acts as, as in kubeadm's
// clusters (its client certificate's common name); the RBAC bootstrap
// policy binds system:kube-controller-manager to it.
const User = "system:kube-controller-manager"

// In-process client limits (--kube-api-qps, --kube-api-burst; upstream's
// 20 and 30). Upstream's limit keeps a remote controller manager from
// flooding the apiserver; in one process the apiserver's priority and
// fairness, which the loopback requests pass through, does that, and the
// low limit only paces the start: with --use-service-account-credentials
// each controller's client costs a ServiceAccount read and a TokenRequest
// through the manager's own client, and at 20/s the controllers started
// 5.3 s after the apiserver served; at these, 0.5 s.
const (
	InProcessQPS   = 200
	InProcessBurst = 400
)

// DefaultClusterCIDR is the Pods' range, k3s's: 256 nodes of a /24.
const DefaultClusterCIDR = "10.42.0.0/16"

// DefaultControllers is kubeboot's --controllers: kubeadm's
// (*,bootstrap-signer-controller,token-cleaner-controller: bootstrap
// tokens are signed into kube-public's cluster-info and deleted once
// expired) without the TTL controller. That controller annotates every
// node with how long a kubelet may cache Secrets and ConfigMaps, which
// only the kubelet's Cache strategy reads (its default is Watch); it
// patches each node as it registers, racing node IPAM's patch of the pod
// CIDR, and every node again each time the cluster grows past 100, 500,
// 1,000 and 2,000 nodes.
func DefaultControllers() []string {
	return []string{"*", names.BootstrapSignerController, names.TokenCleanerController, "-" + names.TTLController}
}

// NewOptions returns kube-controller-manager's options with the defaults
// of running inside kubeboot: no port of its own, client limits for the
// in-process transport (InProcessQPS), one service account per controller
// (--use-service-account-credentials, as kubeadm), so each controller has
// the rights of its system:controller:* role, DefaultControllers, and
// k3s's pod CIDRs
// (--allocate-node-cidrs, --cluster-cidr=DefaultClusterCIDR). The caller
// sets the files only it knows (--root-ca-file,
// --service-account-private-key-file, --cluster-signing-cert-file and
// --cluster-signing-key-file) unless the user did.
func NewOptions() (*cmoptions.KubeControllerManagerOptions, error) {
	o, err := cmoptions.NewKubeControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	o.SecureServing.BindPort = 0
	// As k3s sets them and the CIS benchmark asks: no profiling, and the
	// loopback address should a port be given.
	o.SecureServing.BindAddress = net.IPv4(127, 0, 0, 1)
	o.Generic.Debugging.EnableProfiling = false
	o.Generic.ClientConnection.QPS, o.Generic.ClientConnection.Burst = InProcessQPS, InProcessBurst
	o.KubeCloudShared.UseServiceAccountCredentials = true
	o.Generic.LeaderElection.RetryPeriod.Duration = election.DefaultRetryPeriod
	o.Generic.Controllers = DefaultControllers()
	// As k3s: every node gets a pod CIDR, a /24 of the cluster's, which
	// the pod network (podnetwork) routes between nodes.
	o.KubeCloudShared.AllocateNodeCIDRs = true
	o.KubeCloudShared.ClusterCIDR = DefaultClusterCIDR
	return o, nil
}

// Flags returns opts' flags as kube-controller-manager registers them,
// with NewOptions' defaults kept: registering --allocate-node-cidrs sets
// it to false, whatever opts held.
func Flags(opts *cmoptions.KubeControllerManagerOptions) cliflag.NamedFlagSets {
	allocate := opts.KubeCloudShared.AllocateNodeCIDRs
	fss := opts.Flags(cmapp.KnownControllers(), cmapp.ControllersDisabledByDefault(), cmapp.ControllerAliases())
	opts.KubeCloudShared.AllocateNodeCIDRs = allocate
	for _, fs := range fss.FlagSets {
		if f := fs.Lookup("allocate-node-cidrs"); f != nil {
			f.DefValue = strconv.FormatBool(allocate)
		}
	}
	return fss
}

// Validate checks opts as the kube-controller-manager binary does, and
// refuses leader migration, which hands cloud controllers over between
// kube-controller-manager and a cloud-controller-manager through a second
// lease: kubeboot runs no cloud-controller-manager, and Run's election
// holds one lease.
func Validate(opts *cmoptions.KubeControllerManagerOptions) error {
	if err := opts.Validate(cmapp.KnownControllers(), cmapp.ControllersDisabledByDefault(), cmapp.ControllerAliases()); err != nil {
		return err
	}
	if opts.Generic.LeaderMigration.Enabled && opts.Generic.LeaderElection.LeaderElect {
		return errors.New("--enable-leader-migration: not supported: kubeboot runs no cloud-controller-manager to hand controllers over to")
	}
	return nil
}

// Run runs kube-controller-manager with opts until ctx is done, its
// clients built from client (which authenticates as User). Its informers
// hold the Pods and Nodes they share with the process's other components
// through sharedObjects (nil: none shared). With leader election
// (--leader-elect, the default) the controllers run while it holds the
// lease, which is released when ctx is done; a lost lease stops the
// controllers and Run returns ErrStopped. Without, the controllers run
// directly. Nothing is registered process-wide (configz), so that several
// control planes in one process (tests) can each run theirs. It returns
// nil once ctx is done and the controllers have stopped, or the error
// that kept them from starting.
//
// The election is run here rather than by upstream's Run, whose
// controller context builds informers of its own: here they transform
// through sharedObjects.
func Run(ctx context.Context, opts *cmoptions.KubeControllerManagerOptions, client *rest.Config, sharedObjects *sharedobjects.Pool) error {
	logger := klog.FromContext(ctx).WithName("kube-controller-manager")
	ctx = klog.NewContext(ctx, logger)
	cfg, err := config(ctx, opts, client)
	if err != nil {
		return err
	}
	c := cfg.Complete()
	c.EventBroadcaster.StartStructuredLogging(0)
	c.EventBroadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.Client.CoreV1().Events("")})
	defer c.EventBroadcaster.Shutdown()
	le := c.ComponentConfig.Generic.LeaderElection
	var watchdog *leaderelection.HealthzAdaptor
	if le.LeaderElect {
		// As upstream's: /healthz fails once the lease is overdue.
		watchdog = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	health, mux, err := serve(ctx, c, watchdog)
	if err != nil {
		return err
	}
	if !le.LeaderElect {
		return runControllers(ctx, c, sharedObjects, health, mux)
	}
	id, err := election.NewIdentity()
	if err != nil {
		return fmt.Errorf("kube-controller-manager leader election: %w", err)
	}
	coordinated := utilfeature.DefaultFeatureGate.Enabled(kubefeatures.CoordinatedLeaderElection)
	if coordinated {
		if err := runLeaseCandidate(ctx, c, id, health); err != nil {
			return fmt.Errorf("kube-controller-manager leader election: %w", err)
		}
	}
	var runErr error
	led, err := election.Run(ctx, election.Config{
		Name: cmoptions.KubeControllerManagerUserAgent, Election: le, Identity: id,
		Client: c.Kubeconfig, Recorder: c.EventRecorder, WatchDog: watchdog, Coordinated: coordinated,
	}, func(lead context.Context) {
		runErr = runControllers(lead, c, sharedObjects, health, mux)
		if runErr != nil && lead.Err() != nil {
			// Stopped while starting, by the lease lost (or by ctx, seen
			// below): what a controller's start said as it was cut short
			// is not why (CI saw node IPAM's "failed to list all nodes").
			logger.Info("The controllers stopped while starting", "err", runErr)
			runErr = nil
		}
	})
	switch {
	case err != nil:
		return err
	case ctx.Err() != nil:
		return nil
	case led && runErr != nil:
		return runErr
	}
	return ErrStopped
}

// runLeaseCandidate runs this manager's lease candidate for coordinated
// leader election, as upstream's Run does with the
// CoordinatedLeaderElection feature.
func runLeaseCandidate(ctx context.Context, c *kcmconfig.CompletedConfig, id string, health cmapp.HealthCheckAdder) error {
	effective := c.ComponentGlobalsRegistry.EffectiveVersionFor(basecompatibility.DefaultKubeComponent)
	binary, err := semver.ParseTolerant(effective.BinaryVersion().String())
	if err != nil {
		return err
	}
	emulation, err := semver.ParseTolerant(effective.EmulationVersion().String())
	if err != nil {
		return err
	}
	candidate, synced, err := leaderelection.NewCandidate(c.Client, metav1.NamespaceSystem, id, cmoptions.KubeControllerManagerUserAgent,
		binary.FinalizeVersion(), emulation.FinalizeVersion(), coordinationv1.OldestEmulationVersion)
	if err != nil {
		return err
	}
	health.AddHealthChecker(healthz.NewInformerSyncHealthz(synced))
	go candidate.Run(ctx)
	return nil
}

// ErrStopped is Run's error when kube-controller-manager stopped before
// it was asked to, on a lost leader lease: its controllers cannot start
// again in the same process (several register process-wide state once),
// so its process should stop, as the kube-controller-manager binary does,
// for its supervisor to restart it.
var ErrStopped = errors.New("kube-controller-manager stopped (leader lease lost)")

// runControllers builds and runs the controllers c enables until ctx is
// done, as upstream's Run does once it leads, their health checks added
// to health and their debug handlers to mux (nil without a port).
func runControllers(ctx context.Context, c *kcmconfig.CompletedConfig, sharedObjects *sharedobjects.Pool, health cmapp.HealthCheckAdder, mux *mux.PathRecorderMux) error {
	root := clientbuilder.SimpleControllerClientBuilder{ClientConfig: c.Kubeconfig}
	var builder clientbuilder.ControllerClientBuilder = root
	if c.ComponentConfig.KubeCloudShared.UseServiceAccountCredentials {
		builder = retryingClientBuilder{
			builder: clientbuilder.NewDynamicClientBuilder(rest.AnonymousClientConfig(c.Kubeconfig), c.Client.CoreV1(), metav1.NamespaceSystem),
			ctx:     ctx,
			backoff: clientBackoff,
		}
	}
	cctx, factories, err := newControllerContext(ctx, c, root, builder, sharedObjects)
	if err != nil {
		return err
	}
	defer factories.release()
	tokens, err := newTokensController(ctx, cctx, root)
	if err != nil {
		return err
	}
	policyStatus, err := newPolicyStatusController(cctx)
	if err != nil {
		return err
	}
	descriptors := cmapp.NewControllerDescriptors()
	delete(descriptors, names.ServiceAccountTokenController)             // tokens
	delete(descriptors, names.ValidatingAdmissionPolicyStatusController) // policyStatus
	controllers, err := cmapp.BuildControllers(ctx, cctx, descriptors, mux, health)
	if err != nil {
		return err
	}
	for _, own := range []cmapp.Controller{policyStatus, tokens} {
		if own != nil {
			controllers = append([]cmapp.Controller{own}, controllers...)
		}
	}
	factories.start(ctx)
	defer cctx.InformerFactory.Shutdown()
	close(cctx.InformersStarted)
	if len(controllers) == 0 {
		<-ctx.Done()
		return nil
	}
	if !cmapp.RunControllers(ctx, cctx, controllers, cmapp.ControllerStartJitter, c.ControllerShutdownTimeout) {
		return errors.New("kube-controller-manager: controllers did not stop within --controller-shutdown-timeout")
	}
	return nil
}

// serve serves kube-controller-manager's own port when --secure-port
// is set, as upstream's Run does: /healthz with each controller's check
// and, with leader election, watchdog's check of the lease, /metrics, /configz and profiling, behind authentication and
// authorization delegated to the apiserver. The controllers' checks are
// added to health and their debug handlers to mux (nil without a port).
func serve(ctx context.Context, c *kcmconfig.CompletedConfig, watchdog *leaderelection.HealthzAdaptor) (health cmapp.HealthCheckAdder, _ *mux.PathRecorderMux, _ error) {
	checks := controllerhealthz.NewMutableHealthzHandler()
	if watchdog != nil {
		checks.AddHealthChecker(watchdog)
	}
	if c.SecureServing == nil {
		return checks, nil, nil
	}
	m := genericcontrollermanager.NewBaseHandler(&c.ComponentConfig.Generic.Debugging, checks)
	handler := genericcontrollermanager.BuildHandlerChain(m, &c.Authorization, &c.Authentication)
	if _, _, err := c.SecureServing.Serve(handler, 0, ctx.Done()); err != nil {
		return nil, nil, err
	}
	return checks, m, nil
}

// config is kube-controller-manager's configuration from opts, on
// clients built from client.
func config(ctx context.Context, opts *cmoptions.KubeControllerManagerOptions, client *rest.Config) (*kcmconfig.Config, error) {
	o := *opts
	// The binary builds its clients from --master or --kubeconfig; a host
	// keeps it from looking for an in-cluster configuration, and the
	// clients are replaced below.
	o.Master = client.Host
	o.Metrics = componentmetrics.OrNil(o.Metrics)
	c, err := o.Config(ctx, cmapp.KnownControllers(), cmapp.ControllersDisabledByDefault(), cmapp.ControllerAliases())
	if err != nil {
		return nil, err
	}
	kubeconfig := loopback.WithClientSettings(client, c.Kubeconfig)
	// Silent on the API's warnings, as the binary's PersistentPreRunE
	// makes every client: its controllers watch deprecated APIs (v1
	// Endpoints) on purpose, and each request would log a line.
	kubeconfig.WarningHandler = rest.NoWarnings{}
	c.Kubeconfig = kubeconfig
	c.Client, err = kubernetes.NewForConfig(rest.AddUserAgent(kubeconfig, cmoptions.KubeControllerManagerUserAgent))
	if err != nil {
		return nil, fmt.Errorf("kube-controller-manager client: %w", err)
	}
	// Not stopped with ctx: the leader election records its release
	// after ctx is done; Run shuts the broadcaster down once the election
	// has returned.
	c.EventBroadcaster = record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
	c.EventRecorder = c.EventBroadcaster.NewRecorder(clientgoscheme.Scheme,
		corev1.EventSource{Component: cmoptions.KubeControllerManagerUserAgent})
	return c, nil
}

// Runs reports whether opts run the controller named name (one of
// k8s.io/kubernetes/cmd/kube-controller-manager/names), by --controllers
// and, for the garbage collector, --enable-garbage-collector.
func Runs(opts *cmoptions.KubeControllerManagerOptions, name string) bool {
	if name == names.GarbageCollectorController && !opts.GarbageCollectorController.EnableGarbageCollector {
		return false
	}
	var generic cmconfig.GenericControllerManagerConfiguration
	if err := opts.Generic.ApplyTo(&generic, cmapp.KnownControllers(), cmapp.ControllersDisabledByDefault(), cmapp.ControllerAliases()); err != nil {
		return false
	}
	return genericcontrollermanager.IsControllerEnabled(name, sets.NewString(cmapp.ControllersDisabledByDefault()...), generic.Controllers)
}
