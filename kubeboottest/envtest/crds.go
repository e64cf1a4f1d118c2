package envtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/kubeboot/kubeboot/internal/apiserver/crdinstall"
)

// loadCRDs reads the CRDs of CRDInstallOptions and the Environment's own
// fields, paths first, then the CRDs given as objects. Every error names
// the file and document (or the CRDs entry) it is about. A CRD named
// twice is installed as its last definition, as envtest.
func (te *Environment) loadCRDs() ([]crdinstall.CRD, error) {
	paths := append(append([]string{}, te.CRDInstallOptions.Paths...), te.CRDDirectoryPaths...)
	errorIfMissing := te.ErrorIfCRDPathMissing || te.CRDInstallOptions.ErrorIfPathMissing
	var all []crdinstall.CRD
	var errs []error
	for _, path := range paths {
		found, err := crdinstall.Load(path)
		if errors.Is(err, os.ErrNotExist) && !errorIfMissing {
			klog.InfoS("Skipping a missing CRD path", "path", path)
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("CRD path: %w", err))
			continue
		}
		all = append(all, found...)
	}
	given := append(append([]*apiextensionsv1.CustomResourceDefinition{}, te.CRDInstallOptions.CRDs...), te.CRDs...)
	for i, crd := range given {
		if crd == nil || crd.Name == "" {
			errs = append(errs, fmt.Errorf("CRDs[%d]: metadata.name: Required value", i))
			continue
		}
		all = append(all, crdinstall.CRD{CustomResourceDefinition: crd.DeepCopy(), Source: fmt.Sprintf("CRDs[%d] (%s)", i, crd.Name)})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return lastDefinitions(all), nil
}

// lastDefinitions keeps each CRD name's last definition, in the order the
// names first appeared.
func lastDefinitions(crds []crdinstall.CRD) []crdinstall.CRD {
	index := map[string]int{}
	var out []crdinstall.CRD
	for _, crd := range crds {
		if i, ok := index[crd.Name]; ok {
			klog.InfoS("A CRD is defined more than once; installing the last definition", "crd", crd.Name, "first", out[i].Source, "last", crd.Source)
			out[i] = crd
			continue
		}
		index[crd.Name] = len(out)
		out = append(out, crd)
	}
	return out
}

// pointConversionWebhooks makes each CRD whose kind the scheme knows as
// convertible (or every CRD, with IgnoreSchemeConvertible) convert through
// the test's webhook server at /convert, and drops the conversion webhook
// of the others, whose manifests (controller-gen's) may name a Service
// that does not exist in a test: envtest's rules.
func pointConversionWebhooks(crds []crdinstall.CRD, s *runtime.Scheme, hooks *WebhookInstallOptions) error {
	if len(hooks.LocalServingCAData) == 0 {
		return nil
	}
	convertible := map[schema.GroupKind]bool{}
	for gvk := range s.AllKnownTypes() {
		obj, err := s.New(gvk)
		if err != nil {
			return err
		}
		if ok, err := conversion.IsConvertible(s, obj); ok && err == nil {
			convertible[gvk.GroupKind()] = true
		}
	}
	host := hooks.LocalServingHostExternalName
	if host == "" {
		host = hooks.LocalServingHost
	}
	url := "https://" + net.JoinHostPort(host, strconv.Itoa(hooks.LocalServingPort)) + "/convert"
	for _, crd := range crds {
		spec := &crd.Spec
		if spec.PreserveUnknownFields {
			continue
		}
		if !hooks.IgnoreSchemeConvertible && !convertible[schema.GroupKind{Group: spec.Group, Kind: spec.Names.Kind}] {
			spec.Conversion = nil
			continue
		}
		spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ConversionReviewVersions: []string{"v1", "v1beta1"},
				ClientConfig: &apiextensionsv1.WebhookClientConfig{
					URL:      &url,
					CABundle: hooks.LocalServingCAData,
				},
			},
		}
	}
	return nil
}
