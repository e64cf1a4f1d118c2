// Package crdinstall installs CustomResourceDefinitions from a directory
// when the server starts (--crd-dir), as envtest users expect: the server
// counts as ready only once every CRD is established and its resources are
// in discovery, so a client's first request finds them.
package crdinstall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/kubeboot/kubeboot/internal/platform/manifests"
	"github.com/kubeboot/kubeboot/internal/platform/progress"
)

// FieldManager owns the fields the installer applies.
const FieldManager = "kubeboot-crd-installer"

// pollInterval is how often Install looks for the CRDs' conditions and
// discovery; establishing takes a few hundred milliseconds.
const pollInterval = 20 * time.Millisecond

// CRD is a CustomResourceDefinition read from a file.
type CRD struct {
	*apiextensionsv1.CustomResourceDefinition
	// Source names the file and document it came from, for errors.
	Source string
}

// Load reads the CustomResourceDefinitions of path: a file, or every
// .yaml, .yml and .json file directly in a directory, sorted by file name.
// Documents of other kinds are skipped with a log line, as envtest does (a
// kustomization.yaml often sits beside the CRDs). Malformed documents,
// unknown fields, CRDs of apiextensions.k8s.io/v1beta1 (no longer served)
// and a name defined twice are errors naming the file.
func Load(path string) ([]CRD, error) {
	files, err := manifests.Files(path)
	if err != nil {
		return nil, err
	}
	var crds []CRD
	seen := map[string]string{}
	var errs []error
	for _, file := range files {
		found, err := loadFile(file)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, crd := range found {
			if prev, ok := seen[crd.Name]; ok {
				errs = append(errs, fmt.Errorf("%s: CustomResourceDefinition %q is also defined in %s", crd.Source, crd.Name, prev))
				continue
			}
			seen[crd.Name] = crd.Source
			crds = append(crds, crd)
		}
	}
	return crds, errors.Join(errs...)
}

func loadFile(file string) ([]CRD, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return Parse(file, data)
}

// Parse reads the CustomResourceDefinitions of data, the content of file
// (which names them in errors), as Load reads a file's: a component's
// own CRDs, embedded in the binary.
func Parse(file string, data []byte) ([]CRD, error) {
	docs, err := manifests.Split(file, data)
	if err != nil {
		return nil, err
	}
	return parse(docs)
}

// parse decodes each document whole, once: a CRD's YAML is large (the
// Gateway API's ~1 MB at every start), and reading its kind first would
// parse it twice. A document that does not decode as a CRD is read again
// only for its kind, to skip it if it is another kind.
func parse(docs []manifests.Document) ([]CRD, error) {
	var crds []CRD
	for _, doc := range docs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := yaml.UnmarshalStrict(doc.Data, crd)
		if err != nil && yaml.Unmarshal(doc.Data, &crd.TypeMeta) != nil {
			return nil, fmt.Errorf("%s: %w", doc.Source, err)
		}
		switch {
		case crd.Kind == "" && crd.APIVersion == "":
			continue // only comments, or an empty map
		case crd.Kind != "CustomResourceDefinition":
			klog.InfoS("Skipping a document that is not a CustomResourceDefinition", "source", doc.Source, "kind", crd.Kind)
			continue
		case crd.APIVersion != apiextensionsv1.SchemeGroupVersion.String():
			return nil, fmt.Errorf("%s: apiVersion %q is not served; CustomResourceDefinitions must be %s", doc.Source, crd.APIVersion, apiextensionsv1.SchemeGroupVersion)
		case err != nil:
			return nil, fmt.Errorf("%s: %w", doc.Source, err)
		case crd.Name == "":
			return nil, fmt.Errorf("%s: metadata.name: Required value", doc.Source)
		}
		crds = append(crds, CRD{CustomResourceDefinition: crd, Source: doc.Source})
	}
	return crds, nil
}

// InstallWith is Install through a client of config: how a component
// installs the kinds it serves.
func InstallWith(ctx context.Context, config *rest.Config, crds []CRD) error {
	ext, err := apiextensionsclientset.NewForConfig(config)
	if err != nil {
		return err
	}
	return Install(ctx, ext.ApiextensionsV1(), ext.Discovery(), crds, nil)
}

// Install applies crds that are not UpToDate (server-side apply, so a
// restart updates what the files changed) and waits until each is
// established and its served versions are in discovery. An invalid CRD or
// a name conflict is an error naming its file; Install otherwise keeps
// waiting until ctx ends. It reports its progress to report: many CRDs
// take seconds.
func Install(ctx context.Context, client apiextensionsclient.CustomResourceDefinitionsGetter, disco discovery.DiscoveryInterface, crds []CRD, report progress.Func) error {
	total := int64(len(crds))
	step := func(name string, each func(CRD) error) error {
		for i, crd := range crds {
			report.Report(progress.Update{Step: name, Done: int64(i), Total: total})
			if err := each(crd); err != nil {
				report.Report(progress.Update{Step: name, End: true})
				return err
			}
		}
		report.Report(progress.Update{Step: name, Done: total, Total: total})
		return nil
	}
	// The CRDs found up to date and established need not be read again.
	ready := map[string]bool{}
	if err := step("applying CRDs", func(crd CRD) error {
		if live, err := client.CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{}); err == nil && UpToDate(crd, live) {
			ok, err := established(crd, live)
			ready[crd.Name] = ok
			return err
		}
		return apply(ctx, client, crd)
	}); err != nil {
		return err
	}
	return step("CRDs established", func(crd CRD) error {
		if !ready[crd.Name] {
			if err := waitEstablished(ctx, client, crd); err != nil {
				return err
			}
		}
		return waitDiscovery(ctx, disco, crd)
	})
}

// UpToDate reports whether live already holds what applying crd would
// set: its labels and annotations, and its spec as the server defaults
// it. A server restarted with the same files then sends nothing: an
// apply that changes nothing still costs the server the CRD's decoding
// and validation, every CEL rule compiled, before it finds there is
// nothing to write (the Gateway API's eight: ~0.5 s of CPU at each
// restart).
func UpToDate(crd CRD, live *apiextensionsv1.CustomResourceDefinition) bool {
	want := crd.DeepCopy()
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(want)
	return holds(live.Labels, want.Labels) && holds(live.Annotations, want.Annotations) &&
		equality.Semantic.DeepEqual(want.Spec, live.Spec)
}

// holds reports whether every key of want is in got with its value.
func holds(got, want map[string]string) bool {
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			return false
		}
	}
	return true
}

func apply(ctx context.Context, client apiextensionsclient.CustomResourceDefinitionsGetter, crd CRD) error {
	obj := crd.DeepCopy()
	obj.APIVersion = apiextensionsv1.SchemeGroupVersion.String()
	obj.Kind = "CustomResourceDefinition"
	// Status and server-set metadata are not the file's to apply.
	obj.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	obj.ResourceVersion, obj.UID, obj.CreationTimestamp = "", "", metav1.Time{}
	data, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("%s: %w", crd.Source, err)
	}
	force := true
	return retryTransient(ctx, func() error {
		_, err := client.CustomResourceDefinitions().Patch(ctx, obj.Name, types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
		if err != nil {
			return fmt.Errorf("%s: %w", crd.Source, err)
		}
		return nil
	})
}

func waitEstablished(ctx context.Context, client apiextensionsclient.CustomResourceDefinitionsGetter, crd CRD) error {
	return wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		got, err := client.CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return established(crd, got)
	})
}

// established reports whether live, the server's crd, is established; a
// name the server did not accept is an error.
func established(crd CRD, live *apiextensionsv1.CustomResourceDefinition) (bool, error) {
	for _, c := range live.Status.Conditions {
		switch {
		case c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue:
			return true, nil
		case c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse:
			return false, fmt.Errorf("%s: CustomResourceDefinition %q: names not accepted: %s", crd.Source, crd.Name, c.Message)
		}
	}
	return false, nil
}

func waitDiscovery(ctx context.Context, disco discovery.DiscoveryInterface, crd CRD) error {
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		gv := crd.Spec.Group + "/" + v.Name
		err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(context.Context) (bool, error) {
			list, err := disco.ServerResourcesForGroupVersion(gv)
			if err != nil {
				return false, nil
			}
			return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == crd.Spec.Names.Plural }), nil
		})
		if err != nil {
			return fmt.Errorf("%s: waiting for %s in discovery of %s: %w", crd.Source, crd.Spec.Names.Plural, gv, err)
		}
	}
	return nil
}

// retryTransient retries fn while the server is still starting (its
// loopback client may race the last handlers); a refusal is returned at
// once.
func retryTransient(ctx context.Context, fn func() error) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(context.Context) (bool, error) {
		last = fn()
		if last == nil {
			return true, nil
		}
		var status interface{ Status() metav1.Status }
		if errors.As(last, &status) {
			code := status.Status().Code
			if code >= 400 && code < 500 && code != 404 && code != 429 && code != 409 {
				return false, last
			}
		}
		return false, nil
	})
	if err != nil && last != nil && !errors.Is(err, last) {
		return fmt.Errorf("%w (last error: %v)", err, last)
	}
	return err
}
