package metricsserver

import (
	"context"
	"errors"
	"path/filepath"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/klog/v2"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	msoptions "sigs.k8s.io/metrics-server/cmd/metrics-server/app/options"

	"github.com/kubeboot/kubeboot/controlplane"
)

// Component is metrics-server as a component of a control plane.
type Component struct {
	// opts are the options it was made with; completed, a copy with
	// authentication and authorization delegated to the server.
	opts, completed *msoptions.Options
	election        componentbaseconfig.LeaderElectionConfiguration
	pkiDir          string
	caFile, caKey   string
}

// New returns metrics-server with opts (NewOptions, then its flags) as a
// component: it acts as User, talking to the server in-process, and
// serves while it holds the lease kube-system/metrics-server, taken with
// election's settings (kube-controller-manager's --leader-elect flags;
// without --leader-elect, every server serves and the last to start is
// the one the aggregator reaches).
func New(opts *msoptions.Options, election componentbaseconfig.LeaderElectionConfiguration) *Component {
	election.ResourceName, election.ResourceNamespace = Name, metav1.NamespaceSystem
	return &Component{opts: opts, election: election}
}

// Name implements controlplane.Component.
func (c *Component) Name() string { return Name }

// Complete implements controlplane.Component: its port asks the server
// who its callers are (the aggregator's front proxy, with the user it
// names) and what they may do, through a kubeconfig of s's, as the
// controller manager's does.
func (c *Component) Complete(s controlplane.Settings) (controlplane.Needs, error) {
	o := *c.opts
	if err := validate(&o); err != nil {
		return controlplane.Needs{}, err
	}
	o.Authentication, o.Authorization = s.DelegateToServer(Name, User, o.Authentication, o.Authorization)
	c.completed = &o
	c.pkiDir, c.caFile, c.caKey = filepath.Dir(s.CAFile), s.CAFile, s.CAKeyFile
	return controlplane.Needs{
		User:  User,
		Grant: Access,
		// The last rule Access grants: the others are in by then.
		Allowed: authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceSystem, Verb: "get",
			Group: coordinationv1.GroupName, Resource: "leases", Name: Name},
	}, nil
}

// Run implements controlplane.Component.
func (c *Component) Run(ctx context.Context, s *controlplane.Server) error {
	client, err := s.ClientConfig(User)
	if err != nil {
		return err
	}
	return run(ctx, &server{
		opts: c.completed, election: c.election, client: client,
		advertise: s.AdvertiseAddress(), dial: s.DialCluster(), shared: s.SharedObjects(),
		pkiDir: c.pkiDir, caFile: c.caFile, caKey: c.caKey,
	})
}

// accessName names User's ClusterRole and Role and their bindings.
const accessName = "kubeboot:metrics-server"

// Access gives User the rights of metrics-server's own manifests (read
// Pods and Nodes, read the kubelets' metrics, ask the server who its
// callers are and what they may do, read the front proxy's CA), plus
// what it does here instead of its manifests: publish its Service,
// EndpointSlice and APIService, and hold its lease.
func Access(ctx context.Context, client kubernetes.Interface) error {
	cluster := controlplane.GrantClusterRole(accessName, User,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: []string{"get", "list", "watch"}},
		// system:auth-delegator's rules.
		rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"apiregistration.k8s.io"}, Resources: []string{"apiservices"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"apiregistration.k8s.io"}, Resources: []string{"apiservices"}, ResourceNames: []string{APIServiceName},
			Verbs: []string{"get", "patch", "update"}},
	)
	if err := cluster(ctx, client); err != nil {
		return err
	}
	return controlplane.GrantRole(metav1.NamespaceSystem, accessName, User,
		// extension-apiserver-authentication-reader's rule.
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"extension-apiserver-authentication"},
			Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"}, ResourceNames: []string{Name}, Verbs: []string{"get", "patch", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{discoveryv1.GroupName}, Resources: []string{"endpointslices"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{discoveryv1.GroupName}, Resources: []string{"endpointslices"}, ResourceNames: []string{Name},
			Verbs: []string{"get", "patch", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, ResourceNames: []string{Name},
			Verbs: []string{"get", "patch", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	)(ctx, client)
}

// Removal is what a server with metrics-server disabled runs instead: it
// deletes the APIService, Service and EndpointSlice an earlier start
// published, if they are still this component's. An APIService left
// without its server would make every client's discovery report
// metrics.k8s.io unavailable. (All of a cluster's servers should agree on
// --disable, as in k3s: one that runs metrics-server publishes them
// again.)
type Removal struct{}

// Name implements controlplane.Component.
func (Removal) Name() string { return Name + " removal" }

// Complete implements controlplane.Component: it acts as the server's
// admin.
func (Removal) Complete(controlplane.Settings) (controlplane.Needs, error) {
	return controlplane.Needs{}, nil
}

// Run implements controlplane.Component.
func (Removal) Run(ctx context.Context, s *controlplane.Server) error {
	admin := s.AdminConfig()
	typed, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	aggregator, err := aggregatorclient.NewForConfig(admin)
	if err != nil {
		return err
	}
	ours := func(m metav1.Object, err error) (*metav1.Preconditions, bool, error) {
		switch {
		case apierrors.IsNotFound(err):
			return nil, false, nil
		case err != nil:
			return nil, false, err
		}
		uid := m.GetUID()
		return &metav1.Preconditions{UID: &uid}, m.GetLabels()[managedByLabel] == managedBy, nil
	}
	var deleted []string
	remove := func(kind string, get func() (metav1.Object, error), del func(*metav1.Preconditions) error) error {
		pre, ok, err := ours(get())
		if err != nil || !ok {
			return err
		}
		if err := del(pre); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		deleted = append(deleted, kind)
		return nil
	}
	apiServices := aggregator.ApiregistrationV1().APIServices()
	services := typed.CoreV1().Services(metav1.NamespaceSystem)
	err = errors.Join(
		remove("APIService "+APIServiceName, func() (metav1.Object, error) { return apiServices.Get(ctx, APIServiceName, metav1.GetOptions{}) },
			func(p *metav1.Preconditions) error {
				return apiServices.Delete(ctx, APIServiceName, metav1.DeleteOptions{Preconditions: p})
			}),
		// The EndpointSlice goes with the Service (its owner by label:
		// the garbage collector does not remove it).
		remove("Service "+Name, func() (metav1.Object, error) { return services.Get(ctx, Name, metav1.GetOptions{}) },
			func(p *metav1.Preconditions) error {
				if err := services.Delete(ctx, Name, metav1.DeleteOptions{Preconditions: p}); err != nil {
					return err
				}
				return typed.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem).Delete(ctx, Name, metav1.DeleteOptions{})
			}),
	)
	if err != nil {
		// Not a reason to stop the server: the user can delete them.
		klog.FromContext(ctx).Error(err, "Could not remove the resource metrics API of an earlier start (metrics-server is disabled)")
		return nil
	}
	if len(deleted) > 0 {
		klog.FromContext(ctx).Info("Removed the resource metrics API of an earlier start: metrics-server is disabled", "removed", deleted)
	}
	return nil
}
