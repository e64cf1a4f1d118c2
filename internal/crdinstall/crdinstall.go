// Package crdinstall installs CustomResourceDefinitions from a directory
// when the server starts (--crd-dir), as envtest users expect: the server
// counts as ready only once every CRD is established and its resources are
// in discovery, so a client's first request finds them.
package crdinstall

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
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

// Load reads every .yaml, .yml and .json file directly in dir and returns
// the CustomResourceDefinitions they hold, sorted by file name. Documents
// of other kinds are skipped with a log line, as envtest does (a
// kustomization.yaml often sits beside the CRDs). Malformed documents,
// unknown fields, CRDs of apiextensions.k8s.io/v1beta1 (no longer served)
// and a name defined twice are errors naming the file.
func Load(dir string) ([]CRD, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var crds []CRD
	seen := map[string]string{}
	var errs []error
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		found, err := LoadFile(path)
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

// LoadFile reads the CustomResourceDefinitions of one file, as Load does
// for each file of a directory.
func LoadFile(path string) ([]CRD, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var crds []CRD
	for doc := 1; ; doc++ {
		data, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return crds, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		source := fmt.Sprintf("%s (document %d)", path, doc)
		if len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(data, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		if meta.Kind == "" && meta.APIVersion == "" {
			// Only comments, or an empty map.
			continue
		}
		if meta.Kind != "CustomResourceDefinition" {
			klog.InfoS("Skipping a document that is not a CustomResourceDefinition", "source", source, "kind", meta.Kind)
			continue
		}
		if meta.APIVersion != apiextensionsv1.SchemeGroupVersion.String() {
			return nil, fmt.Errorf("%s: apiVersion %q is not served; CustomResourceDefinitions must be %s", source, meta.APIVersion, apiextensionsv1.SchemeGroupVersion)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		if crd.Name == "" {
			return nil, fmt.Errorf("%s: metadata.name: Required value", source)
		}
		crds = append(crds, CRD{CustomResourceDefinition: crd, Source: source})
	}
}

// Install applies crds (server-side apply, so a restart updates what the
// files changed) and waits until each is established and its served
// versions are in discovery. An invalid CRD or a name conflict is an error
// naming its file; Install otherwise keeps waiting until ctx ends.
func Install(ctx context.Context, client apiextensionsclient.CustomResourceDefinitionsGetter, disco discovery.DiscoveryInterface, crds []CRD) error {
	for _, crd := range crds {
		if err := apply(ctx, client, crd); err != nil {
			return err
		}
	}
	for _, crd := range crds {
		if err := waitEstablished(ctx, client, crd); err != nil {
			return err
		}
		if err := waitDiscovery(ctx, disco, crd); err != nil {
			return err
		}
	}
	return nil
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
		for _, c := range got.Status.Conditions {
			switch {
			case c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue:
				return true, nil
			case c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse:
				return false, fmt.Errorf("%s: CustomResourceDefinition %q: names not accepted: %s", crd.Source, crd.Name, c.Message)
			}
		}
		return false, nil
	})
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
