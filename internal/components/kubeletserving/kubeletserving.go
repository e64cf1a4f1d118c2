// Package kubeletserving approves the kubelets' requests for serving
// certificates (signer kubernetes.io/kubelet-serving), which
// kube-controller-manager leaves to an approver of the cluster's choice,
// for each node's own names and addresses only: the node's credentials
// ask, for a Node that exists, and every DNS name and IP address the
// request names is one of that Node's addresses. kube-controller-manager
// then signs them with the cluster CA, which the API server verifies
// kubelets against (--kubelet-certificate-authority).
package kubeletserving

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/apis/certificates"

	"github.com/kubeboot/kubeboot/controlplane"
)

// User is the user the approver acts as.
const User = "system:kubeboot:kubelet-serving-approver"

// Component is the approver as a component of a control plane.
type Component struct{}

// New returns the approver.
func New() *Component { return &Component{} }

// Name implements controlplane.Component.
func (*Component) Name() string { return "kubelet serving certificate approver" }

// Complete implements controlplane.Component: the approver acts as User,
// with the rights to read Nodes and requests and to approve the
// kubelet-serving signer's.
func (*Component) Complete(controlplane.Settings) (controlplane.Needs, error) {
	return controlplane.Needs{
		User: User,
		Grant: controlplane.GrantClusterRole("system:kubeboot:kubelet-serving-approver", User,
			rbacv1.PolicyRule{APIGroups: []string{certificatesv1.GroupName}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{certificatesv1.GroupName}, Resources: []string{"certificatesigningrequests/approval"}, Verbs: []string{"update"}},
			rbacv1.PolicyRule{APIGroups: []string{certificatesv1.GroupName}, Resources: []string{"signers"},
				ResourceNames: []string{certificatesv1.KubeletServingSignerName}, Verbs: []string{"approve"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		),
		Allowed: authorizationv1.ResourceAttributes{Group: certificatesv1.GroupName, Verb: "update",
			Resource: "certificatesigningrequests", Subresource: "approval"},
	}, nil
}

// Run implements controlplane.Component: it decides every pending
// kubelet-serving request, at once and whenever it or its Node changes.
func (*Component) Run(ctx context.Context, s *controlplane.Server) error {
	config, err := s.ClientConfig(User)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	csrs := factory.Certificates().V1().CertificateSigningRequests()
	nodes := factory.Core().V1().Nodes()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "kubelet-serving-approver"})
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok && pending(csr) {
			queue.Add(csr.Name)
		}
	}
	if _, err := csrs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }}); err != nil {
		return err
	}
	// A request can come before its Node has the addresses it names.
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
		all, _ := csrs.Lister().List(labels.Everything())
		for _, csr := range all {
			enqueue(csr)
		}
	}}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), csrs.Informer().HasSynced, nodes.Informer().HasSynced) {
		return nil
	}
	a := approver{client: client, nodes: nodes.Lister()}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for a.processNext(ctx, queue, csrs.Lister().Get) {
		}
	}, time.Second)
	<-ctx.Done()
	return nil
}

// approver approves or denies requests.
type approver struct {
	client kubernetes.Interface
	nodes  corelisters.NodeLister
}

// processNext decides the next request in queue; false once the queue is
// shut down.
func (a approver) processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string],
	get func(string) (*certificatesv1.CertificateSigningRequest, error)) bool {
	name, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(name)
	csr, err := get(name)
	if apierrors.IsNotFound(err) {
		queue.Forget(name)
		return true
	}
	if err == nil {
		err = a.decide(ctx, csr)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Deciding a kubelet serving certificate request", "csr", name)
		queue.AddRateLimited(name)
		return true
	}
	queue.Forget(name)
	return true
}

// decide approves csr if it asks for its node's own serving certificate,
// denies it if it asks for anything else, and leaves it pending while its
// Node does not exist.
func (a approver) decide(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	if !pending(csr) {
		return nil
	}
	verdict, reason, message := a.verdict(csr)
	if verdict == "" {
		return nil
	}
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: verdict, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastUpdateTime: metav1.Now(),
	})
	_, err := a.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	if err == nil {
		klog.FromContext(ctx).Info("Decided a kubelet serving certificate request", "csr", csr.Name, "decision", verdict, "reason", message)
	}
	return err
}

// verdict is Approved or Denied with its reason and message, or "" to
// wait for the Node.
func (a approver) verdict(csr *certificatesv1.CertificateSigningRequest) (certificatesv1.RequestConditionType, string, string) {
	deny := func(format string, args ...any) (certificatesv1.RequestConditionType, string, string) {
		return certificatesv1.CertificateDenied, "KubeletServingRequestNotOwned", fmt.Sprintf(format, args...)
	}
	nodeName, ok := strings.CutPrefix(csr.Spec.Username, "system:node:")
	if !ok || !slices.Contains(csr.Spec.Groups, "system:nodes") {
		return deny("requested by %s, not by a node's credentials", csr.Spec.Username)
	}
	req, err := certificates.ParseCSR(csr.Spec.Request)
	if err != nil {
		return deny("the request does not parse: %v", err)
	}
	usages := sets.NewString()
	for _, u := range csr.Spec.Usages {
		usages.Insert(string(u))
	}
	if err := certificates.ValidateKubeletServingCSR(req, usages); err != nil {
		return deny("not a kubelet serving certificate request: %v", err)
	}
	if req.Subject.CommonName != csr.Spec.Username {
		return deny("node %s asks for a certificate of %s", nodeName, req.Subject.CommonName)
	}
	node, err := a.nodes.Get(nodeName)
	if err != nil {
		return "", "", "" // not registered yet
	}
	if name, owned := owns(node, req); !owned {
		return deny("the request names %s, which is not an address of node %s", name, nodeName)
	}
	return certificatesv1.CertificateApproved, "AutoApproved",
		fmt.Sprintf("kubeboot approved node %s's serving certificate for its own names and addresses", nodeName)
}

// owns reports whether every DNS name and IP address req names is one of
// node's addresses, or names the first that is not.
func owns(node *corev1.Node, req *x509.CertificateRequest) (string, bool) {
	names, ips := sets.New[string](), sets.New[string]()
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			names.Insert(a.Address)
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			ips.Insert(a.Address)
		}
	}
	for _, n := range req.DNSNames {
		if !names.Has(n) {
			return n, false
		}
	}
	for _, ip := range req.IPAddresses {
		if !ips.Has(ip.String()) {
			return ip.String(), false
		}
	}
	return "", true
}

// pending reports whether csr is a kubelet-serving request not yet
// decided.
func pending(csr *certificatesv1.CertificateSigningRequest) bool {
	if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName {
		return false
	}
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
			return false
		}
	}
	return true
}
