package apiserver

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/compatibility"
	apiserveroptions "k8s.io/kubernetes/cmd/kube-apiserver/app/options"
	"k8s.io/kubernetes/pkg/capabilities"
	kubeoptions "k8s.io/kubernetes/pkg/kubeapiserver/options"
)

// Flags returns the settings the server runs with as kube-apiserver's
// flags: its option groups registered as kube-apiserver registers them,
// on copies holding what was resolved at start (the generated files in
// res, the admission plugins and feature gates in effect, the port
// bound). It is what /flagz serves, and what kube-apiserver's command
// line would be to serve the same. Nothing of cfg is changed.
func Flags(cfg Config, res Resources) cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets

	run := *cfg.GenericServerRun
	// Its feature gate and emulated version flags are the process's
	// registry's, which registering would close; the gates in effect
	// are given below.
	run.ComponentGlobalsRegistry = compatibility.NewComponentGlobalsRegistry()
	if cfg.AdvertiseAddress.IsValid() {
		run.AdvertiseAddress = cfg.AdvertiseAddress.AsSlice()
	}
	run.AddUniversalFlags(fss.FlagSet("generic"))

	etcd := *cfg.Etcd
	etcd.AddFlags(fss.FlagSet("etcd"))

	serving := *cfg.SecureServing
	if res.Listener != nil {
		if _, port, err := net.SplitHostPort(res.Listener.Addr().String()); err == nil {
			serving.BindPort, _ = strconv.Atoi(port)
		}
	}
	serving.AddFlags(fss.FlagSet("secure serving"))

	audit := *cfg.Audit
	audit.AddFlags(fss.FlagSet("auditing"))
	features := *cfg.Features
	features.AddFlags(fss.FlagSet("features"))

	authn := *cfg.Authentication
	if authn.ClientCert != nil && len(res.ClientCAFiles) > 0 {
		clientCert := *authn.ClientCert
		clientCert.ClientCA = res.ClientCAFiles[0]
		authn.ClientCert = &clientCert
	}
	authn.AddFlags(fss.FlagSet("authentication"))
	if authn.Anonymous == nil {
		// No anonymous authenticator is built: what kube-apiserver's
		// --anonymous-auth=false gives.
		fss.FlagSet("authentication").Bool("anonymous-auth", false, "")
	}
	authz := *cfg.Authorization
	authz.AddFlags(fss.FlagSet("authorization"))

	admission := *cfg.Admission
	generic := *admission.GenericAdmission
	generic.EnablePlugins, generic.DisablePlugins = enabledAdmission(&admission), slices.Clone(generic.DisablePlugins)
	admission.GenericAdmission, admission.PluginNames = &generic, nil
	admission.AddFlags(fss.FlagSet("admission"))

	misc := fss.FlagSet("misc")
	misc.String("feature-gates", featureGates(), "")
	misc.Bool("allow-privileged", capabilities.Get().AllowPrivileged, "")
	misc.String("service-cluster-ip-range", cfg.Services.CIDRs.String(), "")
	if r := cfg.Services.NodePorts; r.Size > 0 {
		misc.String("service-node-port-range", fmt.Sprintf("%d-%d", r.Base, r.Base+r.Size-1), "")
	}
	misc.Int("kubernetes-service-node-port", cfg.KubernetesServiceNodePort, "")
	misc.String("endpoint-reconciler-type", string(cfg.EndpointReconcilerType), "")
	misc.Int("apiserver-count", cfg.APIServerCount, "")
	misc.Duration("event-ttl", cfg.EventTTL, "")
	misc.String("service-account-signing-key-file", cfg.ServiceAccountSigningKeyFile, "")
	misc.String("kubelet-certificate-authority", cfg.KubeletCertificateAuthority, "")
	misc.String("kubelet-client-certificate", res.KubeletClientCertFile, "")
	misc.String("kubelet-client-key", res.KubeletClientKeyFile, "")
	misc.String("proxy-client-cert-file", res.ProxyClientCertFile, "")
	misc.String("proxy-client-key-file", res.ProxyClientKeyFile, "")
	return fss
}

// DefaultFlags returns kube-apiserver's flags as its binary registers
// them: its own defaults, which a command line leaves out.
func DefaultFlags() cliflag.NamedFlagSets {
	o := apiserveroptions.NewServerRunOptions()
	// As in Flags: registering would close the process's registry.
	o.GenericServerRunOptions.ComponentGlobalsRegistry = compatibility.NewComponentGlobalsRegistry()
	return o.Flags()
}

// enabledAdmission is the admission plugins a turns on, in the order
// they run, as the admission chain is built.
func enabledAdmission(a *kubeoptions.AdmissionOptions) []string {
	g := a.GenericAdmission
	enable, disable := g.EnablePlugins, g.DisablePlugins
	if len(a.PluginNames) > 0 {
		// The deprecated --admission-control: exactly those.
		enable, disable = a.PluginNames, nil
		for _, p := range g.RecommendedPluginOrder {
			if !slices.Contains(a.PluginNames, p) {
				disable = append(disable, p)
			}
		}
	}
	var on []string
	for _, p := range g.RecommendedPluginOrder {
		off := g.DefaultOffPlugins.Has(p) || slices.Contains(disable, p)
		if slices.Contains(enable, p) || !off {
			on = append(on, p)
		}
	}
	return on
}

// featureGates is the feature gates whose state is not their default,
// as --feature-gates gives them.
func featureGates() string {
	var gates []string
	for name, spec := range utilfeature.DefaultMutableFeatureGate.GetAll() {
		if on := utilfeature.DefaultFeatureGate.Enabled(name); on != spec.Default {
			gates = append(gates, fmt.Sprintf("%s=%t", name, on))
		}
	}
	sort.Strings(gates)
	return strings.Join(gates, ",")
}
