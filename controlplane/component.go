package controlplane

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/spf13/pflag"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// Component is a part of the process that runs beside the API server:
// kube-controller-manager, kube-scheduler, simulated nodes, this host's
// kubelet and kube-proxy. Config.Complete completes each with the control
// plane's settings before anything starts; Server.Run starts each once
// the server is ready and the component's user may act, and stops it, by
// cancelling Run's context, before the server drains. A component whose
// Run fails stops the server, as its own binary's exit would.
type Component interface {
	// Name names the component in errors and logs.
	Name() string
	// Complete resolves the component's settings that come from the
	// control plane (its files, the Service range) and checks them all;
	// it reports what the component needs of the server. It writes
	// nothing.
	Complete(Settings) (Needs, error)
	// Run runs the component until ctx is done.
	Run(ctx context.Context, s *Server) error
}

// ReadyComponent is a Component that becomes ready some time after it
// starts (simulated nodes, once Ready): Server.ComponentsReady waits for
// it.
type ReadyComponent interface {
	Component
	// Ready is closed once the component is ready.
	Ready() <-chan struct{}
}

// FlagsComponent is a Component that is an upstream component with
// flags of its own (kube-controller-manager, kube-scheduler): the server
// publishes the settings it runs with as that component's command line
// (componentflags), since no process of its own shows them.
type FlagsComponent interface {
	Component
	// Flags returns the completed component's settings as its flags,
	// and its flags as its own binary registers them (its defaults).
	Flags() (flags, defaults []*pflag.FlagSet)
}

// Settings are the control plane's settings a component may take its own
// defaults from.
type Settings struct {
	// DataDir is Config.DataDir, resolved.
	DataDir string
	// CAFile and CAKeyFile are the cluster CA's certificate and key, which
	// sign the certificates the cluster's components present. After a
	// rotate-ca, CAFile also holds the certificates of the CA before.
	CAFile, CAKeyFile string
	// CASignerFile is the cluster CA's certificate alone (CAFile's first),
	// for signers that take one certificate with CAKeyFile: the
	// controller manager's CSR signers.
	CASignerFile string
	// ServiceAccountSigningKeyFile is the key that signs service account tokens
	// (Config.ServiceAccountSigningKeyFile, resolved).
	ServiceAccountSigningKeyFile string
	// ServiceClusterIPRange is Config.ServiceClusterIPRange, resolved.
	ServiceClusterIPRange string
	// Nodes are Config.Nodes, resolved (the cluster DNS's address
	// among them): what every node runs with.
	Nodes NodeSettings
	// Progress is Config.Progress: where a component whose start can take
	// long reports how far it has come. Nil: nowhere.
	Progress func(ProgressUpdate)

	kubeconfigs *[]componentKubeconfig
}

// DelegateToServer returns copies of a component's
// --authentication-kubeconfig and --authorization-kubeconfig groups for
// its own port, which asks the server who its callers are and what they
// may do: each defaults to <data-dir>/<name>.kubeconfig, a kubeconfig
// that authenticates as user with a client certificate the cluster CA
// signs, written before the server starts (kubeadm's
// controller-manager.conf and scheduler.conf).
func (s Settings) DelegateToServer(name, user string, authn *genericoptions.DelegatingAuthenticationOptions,
	authz *genericoptions.DelegatingAuthorizationOptions) (*genericoptions.DelegatingAuthenticationOptions, *genericoptions.DelegatingAuthorizationOptions) {
	n, z := *authn, *authz
	if n.RemoteKubeConfigFile != "" && z.RemoteKubeConfigFile != "" {
		return &n, &z
	}
	k := componentKubeconfig{name: name, user: user}
	if n.RemoteKubeConfigFile == "" {
		n.RemoteKubeConfigFile = k.path(s.DataDir)
	}
	if z.RemoteKubeConfigFile == "" {
		z.RemoteKubeConfigFile = k.path(s.DataDir)
	}
	*s.kubeconfigs = append(*s.kubeconfigs, k)
	return &n, &z
}

// Needs are what a component needs of the server.
type Needs struct {
	// User is the in-process user the component acts as
	// (Server.ClientConfig gives its client): it authenticates with a
	// bearer token only this process knows, and reaches the server
	// in-process. Empty: the component reaches the server as any client
	// does (Server.URL, Server.AdminConfig).
	User string
	// Grant, if set, gives User its rights before the component runs,
	// through the server's own client; without it, User's rights are the
	// RBAC bootstrap policy's.
	Grant func(context.Context, kubernetes.Interface) error
	// Allowed is a request User makes as soon as it runs: the component
	// starts once the server allows it (the server's authorizer sees the
	// bootstrap policy shortly after /readyz is 200).
	Allowed authorizationv1.ResourceAttributes
	// Status is the name componentstatuses reports the component under;
	// empty: none.
	Status string
	// GarbageCollector is set when the component runs a garbage collector:
	// the registries then honour foreground and orphan deletion, whose
	// finalizers it removes.
	GarbageCollector bool
	// NamespaceController is set when the component runs a namespace
	// controller: the server then runs none of its own.
	NamespaceController bool
	// SharedObjects is set when the component's informers share their
	// Pods and Nodes with the server's (Server.SharedObjects).
	SharedObjects bool
	// NodeJoins is set when the component approves the client
	// certificates kubelets ask for with nodejoin's bootstrap tokens: the
	// server then admits agents, the nodes that join with its token.
	NodeJoins bool
	// Egress, if set, is how the API server connects to the cluster's
	// network (kube-apiserver's egress selector "cluster": webhooks,
	// aggregated API servers, the proxy subresources, kubelets); at most
	// one component sets it. Nil: directly.
	Egress utilnet.DialFunc
	// Endpoints are served on the secure port, by path, before
	// authentication: each authenticates its callers itself.
	Endpoints map[string]http.Handler
}

// componentKubeconfig is a kubeconfig Settings.DelegateToServer asked for.
type componentKubeconfig struct {
	name string // <data-dir>/<name>.kubeconfig, and its certificate's file name in pki
	user string
}

// path is where the kubeconfig is written.
func (k componentKubeconfig) path(dataDir string) string {
	return filepath.Join(dataDir, k.name+".kubeconfig")
}

// componentSettings are the settings cc gives its components.
func (cc *completedConfig) componentSettings() Settings {
	pkiDir := PKIDirIn(cc.DataDir)
	return Settings{
		DataDir:                      cc.DataDir,
		CAFile:                       filepath.Join(pkiDir, pki.CAName+".crt"),
		CAKeyFile:                    filepath.Join(pkiDir, pki.CAName+".key"),
		CASignerFile:                 filepath.Join(pkiDir, signerDirName, pki.CAName+".crt"),
		ServiceAccountSigningKeyFile: cc.ServiceAccountSigningKeyFile,
		ServiceClusterIPRange:        cc.ServiceClusterIPRange,
		Nodes:                        cc.Nodes,
		Progress:                     cc.Progress,
		kubeconfigs:                  &cc.componentKubeconfigs,
	}
}

// GrantClusterRole is a Needs.Grant that gives user a ClusterRole name
// with rules, bound to it by a ClusterRoleBinding of the same name, both
// created or brought back to these rules.
func GrantClusterRole(name, user string, rules ...rbacv1.PolicyRule) func(context.Context, kubernetes.Interface) error {
	return GrantClusterRoleTo(name, []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}, rules...)
}

// GrantClusterRoleTo is GrantClusterRole for several subjects, users or
// groups.
func GrantClusterRoleTo(name string, subjects []rbacv1.Subject, rules ...rbacv1.PolicyRule) func(context.Context, kubernetes.Interface) error {
	return func(ctx context.Context, client kubernetes.Interface) error {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   subjects,
		}
		if err := updateOrCreate(ctx, client.RbacV1().ClusterRoles(), role); err != nil {
			return fmt.Errorf("ClusterRole %s: %w", name, err)
		}
		if err := updateOrCreate(ctx, client.RbacV1().ClusterRoleBindings(), binding); err != nil {
			return fmt.Errorf("ClusterRoleBinding %s: %w", name, err)
		}
		return nil
	}
}

// GrantRole is GrantClusterRole for rights in one namespace: a Role and
// a RoleBinding named name in namespace.
func GrantRole(namespace, name, user string, rules ...rbacv1.PolicyRule) func(context.Context, kubernetes.Interface) error {
	return GrantRoleTo(namespace, name, []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}, rules...)
}

// GrantRoleTo is GrantRole for several subjects, users or groups.
func GrantRoleTo(namespace, name string, subjects []rbacv1.Subject, rules ...rbacv1.PolicyRule) func(context.Context, kubernetes.Interface) error {
	return func(ctx context.Context, client kubernetes.Interface) error {
		meta := metav1.ObjectMeta{Name: name, Namespace: namespace}
		role := &rbacv1.Role{ObjectMeta: meta, Rules: rules}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: meta,
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   subjects,
		}
		if err := updateOrCreate(ctx, client.RbacV1().Roles(namespace), role); err != nil {
			return fmt.Errorf("Role %s/%s: %w", namespace, name, err)
		}
		if err := updateOrCreate(ctx, client.RbacV1().RoleBindings(namespace), binding); err != nil {
			return fmt.Errorf("RoleBinding %s/%s: %w", namespace, name, err)
		}
		return nil
	}
}

// updateOrCreate stores obj through c, replacing what is there.
func updateOrCreate[T any](ctx context.Context, c interface {
	Update(context.Context, T, metav1.UpdateOptions) (T, error)
	Create(context.Context, T, metav1.CreateOptions) (T, error)
}, obj T) error {
	_, err := c.Update(ctx, obj, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.Create(ctx, obj, metav1.CreateOptions{})
	}
	return err
}
