// Package controllermanager runs upstream's kube-controller-manager
// 1.37.2 inside kubeboot's process (`kubeboot server`): its options, its
// controllers, its leader election, talking to the apiserver in-process.
//
// What differs from the kube-controller-manager binary, and why:
//   - Its clients come from a client configuration the caller gives (the
//     apiserver's in-process one for User), not from --kubeconfig.
//   - It serves no port of its own unless its --secure-port is set: its
//     metrics are in the process-wide registry the apiserver's /metrics
//     serves.
//   - Logging, feature gates and signals belong to the process: Run
//     neither configures logging nor installs a signal handler.
//   - A lost leader lease stops its controllers and Run campaigns again,
//     where the binary exits for its supervisor to restart it; the
//     apiserver in the same process keeps serving.
package controllermanager

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/configz"
	genericcontrollermanager "k8s.io/controller-manager/app"
	cmconfig "k8s.io/controller-manager/config"
	cmfeatures "k8s.io/controller-manager/pkg/features"
	"k8s.io/klog/v2"
	cmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmconfig "k8s.io/kubernetes/cmd/kube-controller-manager/app/config"
	cmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
)

// User is the user kube-controller-manager acts as, as in kubeadm's
// clusters (its client certificate's common name); the RBAC bootstrap
// policy binds system:kube-controller-manager to it.
const User = "system:kube-controller-manager"

// relaunchDelay is how long Run waits before campaigning again after the
// controllers stopped on a lost lease (or failed).
const relaunchDelay = time.Second

// NewOptions returns kube-controller-manager's options with the defaults
// of running inside kubeboot: no port of its own, and one service account
// per controller (--use-service-account-credentials, as kubeadm), so each
// controller has the rights of its system:controller:* role. The caller
// sets the files only it knows (--root-ca-file,
// --service-account-private-key-file, --cluster-signing-cert-file and
// --cluster-signing-key-file) unless the user did.
func NewOptions() (*cmoptions.KubeControllerManagerOptions, error) {
	o, err := cmoptions.NewKubeControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	o.SecureServing.BindPort = 0
	o.KubeCloudShared.UseServiceAccountCredentials = true
	return o, nil
}

// Validate checks opts as the kube-controller-manager binary does.
func Validate(opts *cmoptions.KubeControllerManagerOptions) error {
	return opts.Validate(cmapp.KnownControllers(), cmapp.ControllersDisabledByDefault(), cmapp.ControllerAliases())
}

// Run runs kube-controller-manager with opts until ctx is done, its
// clients built from client (which authenticates as User). With leader
// election, the lease is released when ctx is done, and after a lost
// lease Run campaigns again. It returns nil once ctx is done and the
// controllers have stopped, or the error that kept them from starting.
func Run(ctx context.Context, opts *cmoptions.KubeControllerManagerOptions, client *rest.Config) error {
	// Without this (alpha) gate a lost lease exits the process; with it
	// the controllers stop and the lease is released on the way out.
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{
		string(cmfeatures.ControllerManagerReleaseLeaderElectionLockOnExit): true,
	}); err != nil {
		return fmt.Errorf("kube-controller-manager: %w", err)
	}
	logger := klog.FromContext(ctx).WithName("kube-controller-manager")
	ctx = klog.NewContext(ctx, logger)
	for {
		c, err := config(ctx, opts, client)
		if err != nil {
			return err
		}
		err = cmapp.Run(ctx, c.Complete())
		if ctx.Err() != nil {
			return nil
		}
		logger.Error(err, "Controllers stopped; campaigning for the lease again", "after", relaunchDelay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(relaunchDelay):
		}
	}
}

// config is kube-controller-manager's configuration from opts, on
// clients built from client.
func config(ctx context.Context, opts *cmoptions.KubeControllerManagerOptions, client *rest.Config) (*kcmconfig.Config, error) {
	o := *opts
	// The binary builds its clients from --master or --kubeconfig; a host
	// keeps it from looking for an in-cluster configuration, and the
	// clients are replaced below.
	o.Master = client.Host
	c, err := o.Config(ctx, cmapp.KnownControllers(), cmapp.ControllersDisabledByDefault(), cmapp.ControllerAliases())
	if err != nil {
		return nil, fmt.Errorf("kube-controller-manager: %w", err)
	}
	kubeconfig := rest.CopyConfig(client)
	kubeconfig.DisableCompression = true
	kubeconfig.AcceptContentTypes = c.Kubeconfig.AcceptContentTypes
	kubeconfig.ContentType = c.Kubeconfig.ContentType
	kubeconfig.QPS, kubeconfig.Burst = c.Kubeconfig.QPS, c.Kubeconfig.Burst
	c.Kubeconfig = kubeconfig
	c.Client, err = kubernetes.NewForConfig(rest.AddUserAgent(kubeconfig, cmoptions.KubeControllerManagerUserAgent))
	if err != nil {
		return nil, fmt.Errorf("kube-controller-manager client: %w", err)
	}
	c.EventBroadcaster = record.NewBroadcaster(record.WithContext(ctx))
	c.EventRecorder = c.EventBroadcaster.NewRecorder(clientgoscheme.Scheme,
		corev1.EventSource{Component: cmoptions.KubeControllerManagerUserAgent})
	// Registered by the previous run, if any.
	configz.Delete(cmapp.ConfigzName)
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
