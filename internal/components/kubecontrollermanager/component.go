package kubecontrollermanager

import (
	"context"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"

	"github.com/kubeboot/kubeboot/controlplane"
)

// Component is kube-controller-manager as a component of a control plane.
type Component struct {
	// opts are the options it was made with; completed, a copy with what
	// the control plane gives defaulted.
	opts, completed *cmoptions.KubeControllerManagerOptions
}

// New returns kube-controller-manager with opts (NewOptions, then its
// flags) as a component: it acts as User, talking to the server
// in-process. Unless set in opts, --root-ca-file,
// --cluster-signing-cert-file and --cluster-signing-key-file are the
// cluster CA's, --service-account-private-key-file is the service account
// signing key and --service-cluster-ip-range the server's.
func New(opts *cmoptions.KubeControllerManagerOptions) *Component { return &Component{opts: opts} }

// Name implements controlplane.Component.
func (c *Component) Name() string { return cmoptions.KubeControllerManagerUserAgent }

// Complete implements controlplane.Component: it copies the options
// with the files and the Service range defaulted from s (the groups it
// changes are copied, so the caller's options stay as they were), and
// validates them as the binary does.
func (c *Component) Complete(s controlplane.Settings) (controlplane.Needs, error) {
	o := *c.opts
	sa, csr, ipam := *o.SAController, *o.CSRSigningController, *o.NodeIPAMController
	o.SAController, o.CSRSigningController, o.NodeIPAMController = &sa, &csr, &ipam
	if sa.RootCAFile == "" {
		sa.RootCAFile = s.CAFile
	}
	if sa.ServiceAccountKeyFile == "" {
		sa.ServiceAccountKeyFile = s.ServiceAccountSigningKeyFile
	}
	specific := csr.KubeletServingSignerConfiguration.CertFile + csr.KubeletClientSignerConfiguration.CertFile +
		csr.KubeAPIServerClientSignerConfiguration.CertFile + csr.LegacyUnknownSignerConfiguration.CertFile
	if csr.ClusterSigningCertFile == "" && csr.ClusterSigningKeyFile == "" && specific == "" {
		csr.ClusterSigningCertFile, csr.ClusterSigningKeyFile = s.CASignerFile, s.CAKeyFile
	}
	if ipam.ServiceCIDR == "" {
		ipam.ServiceCIDR = s.ServiceClusterIPRange
	}
	if o.SecureServing.BindPort != 0 {
		o.Authentication, o.Authorization = s.DelegateToServer("controller-manager", User, o.Authentication, o.Authorization)
	}
	if err := Validate(&o); err != nil {
		return controlplane.Needs{}, err
	}
	c.completed = &o
	return controlplane.Needs{
		User:                User,
		Allowed:             authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceSystem, Verb: "get", Resource: "serviceaccounts"},
		Status:              "controller-manager",
		GarbageCollector:    Runs(&o, names.GarbageCollectorController),
		NamespaceController: Runs(&o, names.NamespaceController),
		SharedObjects:       true,
	}, nil
}

// Run implements controlplane.Component.
func (c *Component) Run(ctx context.Context, s *controlplane.Server) error {
	client, err := s.ClientConfig(User)
	if err != nil {
		return err
	}
	return Run(ctx, c.completed, client, s.SharedObjects())
}
