package helmcontroller

import (
	"context"
	_ "embed"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/apiserver/crdinstall"
	"github.com/kubeboot/kubeboot/internal/components/election"
	"github.com/kubeboot/kubeboot/internal/platform/presence"
)

// User is the user the controller acts as.
const User = "system:kubeboot:helm-controller"

// crdsFile names the embedded CustomResourceDefinitions in errors.
const crdsFile = "helmcontroller/crds/helmcharts.yaml"

//go:embed crds/helmcharts.yaml
var crdsYAML []byte

// Client limits of the controller: a release is tens of requests.
const (
	clientQPS   = 100
	clientBurst = 200
)

// Component is the helm controller as a component of a control plane.
type Component struct {
	election componentbaseconfig.LeaderElectionConfiguration
	cacheDir string
	crds     []crdinstall.CRD
}

// Name is the component's, and its lease's in kube-system.
const Name = "helm-controller"

// New returns the helm controller: it runs while it holds the lease
// kube-system/helm-controller, taken with election's settings
// (kube-controller-manager's --leader-elect flags), so that one server
// of a cluster acts on each release.
func New(election componentbaseconfig.LeaderElectionConfiguration) *Component {
	election.ResourceName, election.ResourceNamespace = Name, metav1.NamespaceSystem
	return &Component{election: election}
}

// Name implements controlplane.Component.
func (*Component) Name() string { return Name }

// Complete implements controlplane.Component.
func (c *Component) Complete(s controlplane.Settings) (controlplane.Needs, error) {
	crds, err := crdinstall.Parse(crdsFile, crdsYAML)
	if err != nil {
		return controlplane.Needs{}, err
	}
	c.crds, c.cacheDir = crds, cacheDirIn(s.DataDir)
	return controlplane.Needs{
		User: User,
		// Charts hold any object, RBAC rules included (which only a
		// holder of their rights may grant), as Helm's users are.
		Grant: controlplane.GrantClusterRole(User, User,
			rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			rbacv1.PolicyRule{NonResourceURLs: []string{"*"}, Verbs: []string{"*"}}),
		Allowed: authorizationv1.ResourceAttributes{Verb: "create", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
	}, nil
}

// Run implements controlplane.Component: it installs the CRDs (every
// server: the same apply), in the background of the server's readiness,
// waits for the first HelmChart (until then the controller holds no lease,
// informer or worker) and then runs the controller while it leads.
func (c *Component) Run(ctx context.Context, s *controlplane.Server) error {
	logger := klog.FromContext(ctx).WithName(Name)
	ctx = klog.NewContext(ctx, logger)
	config, err := s.ClientConfig(User)
	if err != nil {
		return err
	}
	config.QPS, config.Burst = clientQPS, clientBurst
	if err := crdinstall.InstallWith(ctx, config, c.crds); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("the HelmChart kinds: %w", err)
	}
	if err := waitForCharts(ctx, config); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("waiting for a HelmChart: %w", err)
	}
	logger.V(2).Info("A HelmChart exists: starting the controller")
	election.Lead(ctx, election.Config{Name: Name, Election: c.election, Client: config},
		func(ctx context.Context) error { return run(ctx, config, c.cacheDir) })
	return nil
}

// waitForCharts returns once a HelmChart exists.
func waitForCharts(ctx context.Context, config *rest.Config) error {
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return err
	}
	charts := dyn.Resource(chartsResource)
	return presence.Wait(ctx, &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return charts.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return charts.Watch(ctx, o)
		},
	})
}
