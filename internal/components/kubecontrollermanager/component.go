package kubecontrollermanager

import (
	"context"

	"github.com/spf13/pflag"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cliflag "k8s.io/component-base/cli/flag"
	cmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	cmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/componentflags"
)

// Component is kube-controller-manager as a component of a control plane.
type Component struct {
	// opts are the options it was made with; completed, a copy with what
	// the control plane gives defaulted.
	opts, completed *cmoptions.KubeControllerManagerOptions
	flags           cliflag.NamedFlagSets
}

// New returns kube-controller-manager with opts (NewOptions, then its
// flags) as a component: it acts as User, talking to the server
// in-process. Unless set in opts, --root-ca-file,
// --cluster-signing-cert-file and --cluster-signing-key-file are the
// cluster CA's, --service-account-private-key-file is the service account
// signing key and --service-cluster-ip-range the server's.
//
// flags are opts' flags (Flags), as they were parsed: the settings the
// component publishes (controlplane.FlagsComponent).
func New(opts *cmoptions.KubeControllerManagerOptions, flags cliflag.NamedFlagSets) *Component {
	return &Component{opts: opts, flags: flags}
}

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

// Flags implements controlplane.FlagsComponent: the flags opts was
// parsed with (and upstream's defaults), but for the files and the Service range Complete
// defaulted, given as it runs with them. (Registering the flags again on
// the completed options would reset those whose registration writes a
// default of its own.)
func (c *Component) Flags() (flags, defaults []*pflag.FlagSet) {
	completed := pflag.NewFlagSet("completed", pflag.ContinueOnError)
	completed.String("root-ca-file", c.completed.SAController.RootCAFile, "")
	completed.String("service-account-private-key-file", c.completed.SAController.ServiceAccountKeyFile, "")
	completed.String("cluster-signing-cert-file", c.completed.CSRSigningController.ClusterSigningCertFile, "")
	completed.String("cluster-signing-key-file", c.completed.CSRSigningController.ClusterSigningKeyFile, "")
	completed.String("service-cluster-ip-range", c.completed.NodeIPAMController.ServiceCIDR, "")
	upstream, err := cmoptions.NewKubeControllerManagerOptions()
	if err == nil {
		defaults = componentflags.Sets(upstream.Flags(cmapp.KnownControllers(), cmapp.ControllersDisabledByDefault(), cmapp.ControllerAliases()))
	}
	return append([]*pflag.FlagSet{completed}, componentflags.Sets(c.flags)...), defaults
}

// Run implements controlplane.Component.
func (c *Component) Run(ctx context.Context, s *controlplane.Server) error {
	client, err := s.ClientConfig(User)
	if err != nil {
		return err
	}
	return Run(ctx, c.completed, client, s.SharedObjects())
}
