// Package kubeletclient approves a kubelet's first client certificate,
// the request it makes with a bootstrap token nodejoin issued, for the
// node the token names and no other; kube-controller-manager then signs
// it. It also hands each node's password binding to the node's Node, so
// that deleting the Node frees its name (the garbage collector deletes
// the binding with it).
package kubeletclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/apis/certificates"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/csrapproval"
	"github.com/kubeboot/kubeboot/internal/platform/nodejoin"
)

// bindingResync is how often a password binding whose Node has not
// registered yet is looked at again.
const bindingResync = 5 * time.Second

// User is the user the approver acts as.
const User = "system:kubeboot:kubelet-client-approver"

// Component is the approver as a component of a control plane.
type Component struct{}

// New returns the approver.
func New() *Component { return &Component{} }

// Name implements controlplane.Component.
func (*Component) Name() string { return "kubelet client certificate approver" }

// Complete implements controlplane.Component: the approver acts as User,
// with the rights to read requests, bootstrap tokens and Nodes, to
// approve the kube-apiserver-client-kubelet signer's requests, and to
// give password bindings their Node as owner; the server admits agents.
func (*Component) Complete(controlplane.Settings) (controlplane.Needs, error) {
	return controlplane.Needs{
		User: User,
		Grant: func(ctx context.Context, client kubernetes.Interface) error {
			return errors.Join(grantCluster(ctx, client), grantSystem(ctx, client))
		},
		// The right granted last.
		Allowed:   authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceSystem, Verb: "list", Resource: "secrets"},
		NodeJoins: true,
	}, nil
}

// The approver's rights: requests and Nodes in the cluster, the
// bootstrap tokens and password bindings in kube-system.
var (
	grantCluster = controlplane.GrantClusterRole("system:kubeboot:kubelet-client-approver", User,
		append(csrapproval.Rules(certificatesv1.KubeAPIServerClientKubeletSignerName),
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}})...,
	)
	grantSystem = controlplane.GrantRole(metav1.NamespaceSystem, "system:kubeboot:kubelet-client-approver", User,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "update"}},
	)
)

// Run implements controlplane.Component.
func (*Component) Run(ctx context.Context, s *controlplane.Server) error {
	client, err := s.Client(User)
	if err != nil {
		return err
	}
	// The bootstrap tokens: kube-system's Secrets of their type, on a
	// factory of their own, started here.
	tokenFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(metav1.NamespaceSystem),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "type=" + string(bootstrapapi.SecretTypeBootstrapToken) }))
	tokens := tokenFactory.Core().V1().Secrets()
	tokenInformer := tokens.Informer()
	// The password bindings, on a factory of their own whose resync looks
	// again at those whose Node has not registered yet.
	bindingFactory := informers.NewSharedInformerFactoryWithOptions(client, bindingResync, informers.WithNamespace(metav1.NamespaceSystem),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "type=" + string(nodejoin.PasswordSecretType) }))
	own := func(obj any) {
		if secret, ok := obj.(*corev1.Secret); ok && len(secret.OwnerReferences) == 0 {
			if err := ownBinding(ctx, client, secret); err != nil {
				klog.FromContext(ctx).Error(err, "Giving a node password binding its Node as owner", "secret", secret.Name)
			}
		}
	}
	if _, err := bindingFactory.Core().V1().Secrets().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: own, UpdateFunc: func(_, obj any) { own(obj) }}); err != nil {
		return err
	}
	bindingFactory.StartWithContext(ctx)
	defer bindingFactory.Shutdown()
	tokenFactory.StartWithContext(ctx)
	defer tokenFactory.Shutdown()
	a := approver{tokens: tokens.Lister().Secrets(metav1.NamespaceSystem)}
	// A request can come before the approver sees its token.
	return (&csrapproval.Approver{Name: "kubelet-client-approver", Signer: certificatesv1.KubeAPIServerClientKubeletSignerName, Decide: a.verdict}).
		Run(ctx, client, informers.NewSharedInformerFactory(client, 0), tokenInformer)
}

// ownBinding makes the Node a password binding is for its owner, once
// the Node exists.
func ownBinding(ctx context.Context, client kubernetes.Interface, binding *corev1.Secret) error {
	nodeName, ok := strings.CutSuffix(binding.Name, nodejoin.PasswordSecretName(""))
	if !ok {
		return nil
	}
	node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // not registered yet: the resync looks again
	}
	if err != nil {
		return err
	}
	binding = binding.DeepCopy()
	binding.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
	_, err = client.CoreV1().Secrets(metav1.NamespaceSystem).Update(ctx, binding, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // the informer brings the change
	}
	return err
}

// approver decides requests by the bootstrap tokens they were made with.
type approver struct {
	tokens corelisters.SecretNamespaceLister
}

// verdict approves a kubelet's client certificate request made with a
// token nodejoin issued when it asks for the token's node, and denies it
// when it asks for anything else. Requests made otherwise (a node
// renewing its certificate, a kubeadm token) are left to
// kube-controller-manager's approver.
func (a approver) verdict(csr *certificatesv1.CertificateSigningRequest) csrapproval.Verdict {
	id, ok := strings.CutPrefix(csr.Spec.Username, bootstrapapi.BootstrapUserPrefix)
	if !ok {
		return csrapproval.Verdict{}
	}
	token, err := a.tokens.Get(bootstrapapi.BootstrapTokenSecretPrefix + id)
	if err != nil {
		return csrapproval.Verdict{} // not seen yet, or not ours
	}
	nodeName, ok := token.Annotations[nodejoin.NodeAnnotation]
	if !ok {
		return csrapproval.Verdict{}
	}
	deny := func(format string, args ...any) csrapproval.Verdict {
		return csrapproval.Verdict{Type: certificatesv1.CertificateDenied, Reason: "NotTheTokensNode", Message: fmt.Sprintf(format, args...)}
	}
	req, err := certificates.ParseCSR(csr.Spec.Request)
	if err != nil {
		return deny("the request does not parse: %v", err)
	}
	usages := sets.NewString()
	for _, u := range csr.Spec.Usages {
		usages.Insert(string(u))
	}
	if err := certificates.ValidateKubeletClientCSR(req, usages); err != nil {
		return deny("not a kubelet client certificate request: %v", err)
	}
	if want := "system:node:" + nodeName; req.Subject.CommonName != want {
		return deny("the bootstrap token is node %s's, and the request asks for %s", nodeName, req.Subject.CommonName)
	}
	return csrapproval.Verdict{Type: certificatesv1.CertificateApproved, Reason: "AutoApproved",
		Message: fmt.Sprintf("kubeboot approved node %s's client certificate, asked for with the bootstrap token issued to it", nodeName)}
}
