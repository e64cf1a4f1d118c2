package controlplane

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes"

	"k8s.io/client-go/rest"
	cmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
	schedoptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/kubeboot/kubeboot/internal/controllermanager"
	"github.com/kubeboot/kubeboot/internal/pki"
	"github.com/kubeboot/kubeboot/internal/scheduler"
	"github.com/kubeboot/kubeboot/internal/simulatednodes"
)

// componentStopTimeout bounds how long the in-process components may take
// to stop before the apiserver drains anyway: kube-controller-manager's
// --controller-shutdown-timeout default.
const componentStopTimeout = 10 * time.Second

// NewControllerManagerOptions returns the default of
// Config.ControllerManager: kube-controller-manager's options as it runs
// in kubeboot's process (no port of its own, one service account per
// controller).
func NewControllerManagerOptions() (*cmoptions.KubeControllerManagerOptions, error) {
	return controllermanager.NewOptions()
}

// NewSchedulerOptions returns the default of Config.Scheduler:
// kube-scheduler's options as it runs in kubeboot's process (no port of
// its own).
func NewSchedulerOptions() *schedoptions.Options { return scheduler.NewOptions() }

// NewSimulatedNodesOptions returns the defaults of Config.SimulatedNodes
// (no nodes until Count is set).
func NewSimulatedNodesOptions() *simulatednodes.Options { return simulatednodes.NewOptions() }

// controllerManagerOptions copies cc.ControllerManager with the files and
// the Service range defaulted from the data directory and cc (the groups
// it changes are copied, so the caller's options stay as they were).
func controllerManagerOptions(cc *completedConfig) *cmoptions.KubeControllerManagerOptions {
	o := *cc.ControllerManager
	sa, csr, ipam := *o.SAController, *o.CSRSigningController, *o.NodeIPAMController
	o.SAController, o.CSRSigningController, o.NodeIPAMController = &sa, &csr, &ipam
	pkiDir := filepath.Join(cc.DataDir, pkiDirName)
	setDefault(&sa.RootCAFile, filepath.Join(pkiDir, pki.CAName+".crt"))
	signingKey := cc.ServiceAccountSigningKeyFile
	setDefault(&signingKey, DefaultServiceAccountSigningKeyFile(cc.DataDir))
	setDefault(&sa.ServiceAccountKeyFile, signingKey)
	specific := csr.KubeletServingSignerConfiguration.CertFile + csr.KubeletClientSignerConfiguration.CertFile +
		csr.KubeAPIServerClientSignerConfiguration.CertFile + csr.LegacyUnknownSignerConfiguration.CertFile
	if csr.ClusterSigningCertFile == "" && csr.ClusterSigningKeyFile == "" && specific == "" {
		csr.ClusterSigningCertFile = filepath.Join(pkiDir, pki.CAName+".crt")
		csr.ClusterSigningKeyFile = filepath.Join(pkiDir, pki.CAName+".key")
	}
	setDefault(&ipam.ServiceCIDR, cc.ServiceClusterIPRange)
	if o.SecureServing.BindPort != 0 {
		o.Authentication, o.Authorization = cc.delegateToAPIServer(componentKubeconfig{"controller-manager", controllermanager.User},
			o.Authentication, o.Authorization)
	}
	return &o
}

// schedulerOptions copies cc.Scheduler, with the kubeconfig of its port
// defaulted as controllerManagerOptions does.
func schedulerOptions(cc *completedConfig) *schedoptions.Options {
	o := *cc.Scheduler
	if o.SecureServing.BindPort != 0 {
		o.Authentication, o.Authorization = cc.delegateToAPIServer(componentKubeconfig{"scheduler", scheduler.User},
			o.Authentication, o.Authorization)
	}
	return &o
}

// componentKubeconfig is the kubeconfig with which an in-process
// component's own port (its --secure-port, off by default) asks the
// apiserver who a request is from and what it may do: kubeadm's
// controller-manager.conf and scheduler.conf. The components' own
// requests go in-process, not through it.
type componentKubeconfig struct {
	name string // <data-dir>/<name>.kubeconfig, and its certificate's file name in pki
	user string
}

// path is where the kubeconfig is written.
func (k componentKubeconfig) path(dataDir string) string {
	return filepath.Join(dataDir, k.name+".kubeconfig")
}

// delegateToAPIServer returns copies of a component's --authentication-kubeconfig
// and --authorization-kubeconfig groups, each defaulted to k's kubeconfig,
// which the certificates step then writes.
func (cc *completedConfig) delegateToAPIServer(k componentKubeconfig, authn *genericoptions.DelegatingAuthenticationOptions,
	authz *genericoptions.DelegatingAuthorizationOptions) (*genericoptions.DelegatingAuthenticationOptions, *genericoptions.DelegatingAuthorizationOptions) {
	n, z := *authn, *authz
	if n.RemoteKubeConfigFile != "" && z.RemoteKubeConfigFile != "" {
		return &n, &z
	}
	setDefault(&n.RemoteKubeConfigFile, k.path(cc.DataDir))
	setDefault(&z.RemoteKubeConfigFile, k.path(cc.DataDir))
	cc.componentKubeconfigs = append(cc.componentKubeconfigs, k)
	return &n, &z
}

// inProcessUsers are the users the components cc runs act as.
func (cc *completedConfig) inProcessUsers() []string {
	var users []string
	if cc.controllerManager != nil {
		users = append(users, controllermanager.User)
	}
	if cc.Scheduler != nil {
		users = append(users, scheduler.User)
	}
	if cc.simulatesNodes() {
		users = append(users, simulatednodes.User)
	}
	return users
}

// simulatesNodes reports whether the process runs simulated nodes.
func (cc *completedConfig) simulatesNodes() bool {
	return cc.SimulatedNodes != nil && cc.SimulatedNodes.Count > 0
}

// allocatesNodeCIDRs reports whether kube-controller-manager in the
// process gives nodes their pod CIDRs (--allocate-node-cidrs).
func (cc *completedConfig) allocatesNodeCIDRs() bool {
	return cc.runsController(names.NodeIpamController) && cc.controllerManager.KubeCloudShared.AllocateNodeCIDRs
}

// grant runs a component's grant with a client of the apiserver's own
// (loopback) configuration, retrying while the server settles.
func grant(ctx context.Context, loopback *rest.Config, grant func(context.Context, kubernetes.Interface) error) error {
	client, err := kubernetes.NewForConfig(loopback)
	if err != nil {
		return err
	}
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, authorizedTimeout, true, func(ctx context.Context) (bool, error) {
		last = grant(ctx, client)
		return last == nil, nil
	}); err != nil {
		return fmt.Errorf("%w (last: %v)", err, last)
	}
	return nil
}

// runsController reports whether kube-controller-manager runs in the
// process with the controller called name.
func (cc *completedConfig) runsController(name string) bool {
	return cc.controllerManager != nil && controllermanager.Runs(cc.controllerManager, name)
}

// garbageCollection: the registries' garbage collection is on when
// kube-controller-manager's garbage collector runs.
func (cc *completedConfig) garbageCollection() bool {
	return cc.runsController(names.GarbageCollectorController)
}

// waitAuthorized waits until the server allows client the request attrs
// describes. /readyz is 200 once the RBAC bootstrap policy is stored; the
// authorizer sees it through an informer a moment later, and a component
// that starts in between fails on its first request (its binary would
// exit and be restarted).
func waitAuthorized(ctx context.Context, client *rest.Config, attrs authorizationv1.ResourceAttributes) error {
	c, err := kubernetes.NewForConfig(client)
	if err != nil {
		return err
	}
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, authorizedTimeout, true, func(ctx context.Context) (bool, error) {
		r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = r.Status.Reason
		return r.Status.Allowed, nil
	})
	if err != nil {
		return fmt.Errorf("not allowed to %s %s within %s: %s", attrs.Verb, attrs.Resource, authorizedTimeout, last)
	}
	return nil
}

// authorizedTimeout bounds waitAuthorized.
const authorizedTimeout = time.Minute

// component is one of the parts runComponents runs.
type component struct {
	enabled bool
	// user is the in-process user it acts as; none for
	// Config.Components, which reach the server as its clients do.
	user string
	// status is the name componentstatuses reports it under, if any.
	status string
	// grant, if set, gives user its rights first, through the
	// apiserver's own client.
	grant func(context.Context, kubernetes.Interface) error
	// needs is a request the component's RBAC role allows, and which
	// it makes as soon as it starts.
	needs authorizationv1.ResourceAttributes
	run   func(context.Context, *rest.Config) error
}

// runComponents runs the in-process components until ctx is done and
// returns once they have all stopped. A component that cannot start, or
// stops on its own (kube-controller-manager on a lost lease), sends its
// error to failed: the server then stops, as that component's binary
// would exit.
func (s *Server) runComponents(ctx context.Context, failed chan<- error) {
	fail := func(err error) {
		select {
		case failed <- err:
		default:
		}
	}
	components := []component{
		{s.cfg.controllerManager != nil, controllermanager.User, "controller-manager", nil,
			authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceSystem, Verb: "get", Resource: "serviceaccounts"},
			func(ctx context.Context, c *rest.Config) error {
				return controllermanager.Run(ctx, s.cfg.controllerManager, c, s.sharedObjects)
			}},
		{s.cfg.scheduler != nil, scheduler.User, "scheduler", nil,
			authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Subresource: "binding"},
			func(ctx context.Context, c *rest.Config) error {
				return scheduler.Run(ctx, s.cfg.scheduler, c, s.sharedObjects)
			}},
		{s.cfg.simulatesNodes(), simulatednodes.User, "", simulatednodes.Access,
			authorizationv1.ResourceAttributes{Verb: "patch", Resource: "nodes", Subresource: "status"},
			func(ctx context.Context, c *rest.Config) error {
				return simulatednodes.Run(ctx, s.cfg.SimulatedNodes, c, !s.cfg.allocatesNodeCIDRs(), func() { close(s.nodesReady) })
			}},
	}
	for _, c := range s.cfg.Components {
		components = append(components, component{enabled: true,
			run: func(ctx context.Context, _ *rest.Config) error {
				if err := c.Run(ctx, s); err != nil {
					return fmt.Errorf("%s: %w", c.Name, err)
				}
				return nil
			}})
	}
	var wg sync.WaitGroup
	for _, c := range components {
		if !c.enabled {
			continue
		}
		var client *rest.Config
		if c.user != "" {
			var err error
			if client, err = s.api.ClientConfigFor(c.user); err != nil {
				fail(err)
				continue
			}
		}
		var state componentState
		if c.status != "" {
			state.set(errNotStarted)
			s.api.SetComponentStatus(c.status, state.get)
		}
		wg.Go(func() {
			if c.grant != nil {
				if err := grant(ctx, s.api.Loopback, c.grant); err != nil {
					if ctx.Err() == nil {
						fail(fmt.Errorf("%s: %w", c.user, err))
					}
					return
				}
			}
			if client != nil {
				if err := waitAuthorized(ctx, client, c.needs); err != nil {
					if ctx.Err() == nil {
						fail(fmt.Errorf("%s: %w", c.user, err))
					}
					return
				}
			}
			state.set(nil)
			err := c.run(ctx, client)
			if err != nil && ctx.Err() == nil {
				fail(err)
			}
			if err == nil {
				err = errStopped
			} else {
				err = fmt.Errorf("%w: %w", errStopped, err)
			}
			state.set(err)
		})
	}
	wg.Wait()
}

var (
	errNotStarted = errors.New("not started yet")
	errStopped    = errors.New("stopped")
)

// componentState is an in-process component's health as
// componentstatuses reports it: nil while it runs.
type componentState struct {
	mu  sync.Mutex
	err error
}

func (c *componentState) set(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

func (c *componentState) get() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
