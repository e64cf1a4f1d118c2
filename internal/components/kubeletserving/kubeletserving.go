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

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/kubernetes/pkg/apis/certificates"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/csrapproval"
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
			append(csrapproval.Rules(certificatesv1.KubeletServingSignerName),
				rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}})...,
		),
		Allowed: authorizationv1.ResourceAttributes{Group: certificatesv1.GroupName, Verb: "update",
			Resource: "certificatesigningrequests", Subresource: "approval"},
	}, nil
}

// Run implements controlplane.Component: it decides every pending
// kubelet-serving request, at once and whenever it or a Node changes.
func (*Component) Run(ctx context.Context, s *controlplane.Server) error {
	client, err := s.Client(User)
	if err != nil {
		return err
	}
	// Its Nodes are the copies the process's other informers hold.
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(s.SharedObjects().Transform))
	nodes := factory.Core().V1().Nodes()
	a := approver{nodes: nodes.Lister()}
	// A request can come before its Node has the addresses it names.
	return (&csrapproval.Approver{Name: "kubelet-serving-approver", Signer: certificatesv1.KubeletServingSignerName, Decide: a.verdict}).
		Run(ctx, client, factory, nodes.Informer())
}

// approver decides requests by the Nodes they name.
type approver struct {
	nodes corelisters.NodeLister
}

// verdict approves a request for its node's own names and addresses,
// denies one for anything else, and leaves it pending while its Node
// does not exist.
func (a approver) verdict(csr *certificatesv1.CertificateSigningRequest) csrapproval.Verdict {
	deny := func(format string, args ...any) csrapproval.Verdict {
		return csrapproval.Verdict{Type: certificatesv1.CertificateDenied, Reason: "KubeletServingRequestNotOwned", Message: fmt.Sprintf(format, args...)}
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
		return csrapproval.Verdict{} // not registered yet
	}
	if name, owned := owns(node, req); !owned {
		return deny("the request names %s, which is not an address of node %s", name, nodeName)
	}
	return csrapproval.Verdict{Type: certificatesv1.CertificateApproved, Reason: "AutoApproved",
		Message: fmt.Sprintf("kubeboot approved node %s's serving certificate for its own names and addresses", nodeName)}
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
