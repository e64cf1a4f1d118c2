package openapi

import (
	"reflect"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/version"
	apiopenapi "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

func refTo(name string) spec.Ref {
	return spec.MustCreateRef("#/definitions/" + common.EscapeJsonPointer(name))
}

func definitions(t *testing.T) map[string]common.OpenAPIDefinition {
	t.Helper()
	defs := GetOpenAPIDefinitions(refTo)
	if len(defs) == 0 {
		t.Fatal("GetOpenAPIDefinitions returned no definitions")
	}
	return defs
}

func property(t *testing.T, defs map[string]common.OpenAPIDefinition, def, prop string) spec.Schema {
	t.Helper()
	d, ok := defs[def]
	if !ok {
		t.Fatalf("no definition %q", def)
	}
	p, ok := d.Schema.Properties[prop]
	if !ok {
		t.Fatalf("definition %q has no property %q", def, prop)
	}
	return p
}

func TestKeysAreOpenAPIModelNames(t *testing.T) {
	defs := definitions(t)
	// The generator keys definitions by OpenAPIModelName(), which for
	// k8s.io/api and k8s.io/apimachinery is the REST-friendly name, not the Go
	// import path.
	want := map[string]string{
		"io.k8s.api.core.v1.Service":                        corev1.Service{}.OpenAPIModelName(),
		"io.k8s.api.core.v1.ConfigMap":                      corev1.ConfigMap{}.OpenAPIModelName(),
		"io.k8s.api.coordination.v1.Lease":                  coordinationv1.Lease{}.OpenAPIModelName(),
		"io.k8s.api.discovery.v1.EndpointSlice":             discoveryv1.EndpointSlice{}.OpenAPIModelName(),
		"io.k8s.api.events.v1.Event":                        eventsv1.Event{}.OpenAPIModelName(),
		"io.k8s.api.networking.v1.IPAddress":                networkingv1.IPAddress{}.OpenAPIModelName(),
		"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta":   metav1.ObjectMeta{}.OpenAPIModelName(),
		"io.k8s.apimachinery.pkg.apis.meta.v1.Status":       metav1.Status{}.OpenAPIModelName(),
		"io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent":   metav1.WatchEvent{}.OpenAPIModelName(),
		"io.k8s.apimachinery.pkg.util.intstr.IntOrString":   intstr.IntOrString{}.OpenAPIModelName(),
		"io.k8s.apimachinery.pkg.api.resource.Quantity":     resource.Quantity{}.OpenAPIModelName(),
		"io.k8s.apimachinery.pkg.runtime.RawExtension":      runtime.RawExtension{}.OpenAPIModelName(),
		"io.k8s.apimachinery.pkg.version.Info":              version.Info{}.OpenAPIModelName(),
		"io.k8s.apimachinery.pkg.apis.meta.v1.APIGroupList": metav1.APIGroupList{}.OpenAPIModelName(),
	}
	for name, modelName := range want {
		if name != modelName {
			t.Errorf("OpenAPIModelName() = %q, want %q", modelName, name)
		}
		if _, ok := defs[name]; !ok {
			t.Errorf("missing definition %q", name)
		}
	}
	for name := range defs {
		if strings.Contains(name, "/") {
			t.Errorf("definition key %q is a Go import path, want a model name", name)
		}
	}
}

func TestDependenciesResolve(t *testing.T) {
	defs := definitions(t)
	for name, d := range defs {
		for _, dep := range d.Dependencies {
			if _, ok := defs[dep]; !ok {
				t.Errorf("%s depends on %q, which has no definition", name, dep)
			}
		}
	}
}

func TestServiceSpecReference(t *testing.T) {
	defs := definitions(t)
	svc := defs["io.k8s.api.core.v1.Service"]
	specProp := property(t, defs, "io.k8s.api.core.v1.Service", "spec")
	if got, want := specProp.Ref.String(), "#/definitions/io.k8s.api.core.v1.ServiceSpec"; got != want {
		t.Errorf("Service.spec $ref = %q, want %q", got, want)
	}
	found := false
	for _, dep := range svc.Dependencies {
		if dep == "io.k8s.api.core.v1.ServiceSpec" {
			found = true
		}
	}
	if !found {
		t.Errorf("Service dependencies %v do not include ServiceSpec", svc.Dependencies)
	}
}

// TestListTypeExtensions checks the x-kubernetes-list-* markers that
// server-side apply builds its merge rules from.
func TestListTypeExtensions(t *testing.T) {
	defs := definitions(t)
	cases := []struct {
		def, prop string
		listType  string
		mapKeys   []interface{}
	}{
		{"io.k8s.api.core.v1.ServiceSpec", "ports", "map", []interface{}{"port", "protocol"}},
		{"io.k8s.api.core.v1.ServiceSpec", "clusterIPs", "atomic", nil},
		{"io.k8s.api.core.v1.ServiceStatus", "conditions", "map", []interface{}{"type"}},
		{"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "finalizers", "set", nil},
		{"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "ownerReferences", "map", []interface{}{"uid"}},
		{"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "managedFields", "atomic", nil},
		{"io.k8s.api.discovery.v1.EndpointSlice", "endpoints", "atomic", nil},
	}
	for _, c := range cases {
		p := property(t, defs, c.def, c.prop)
		if got := p.Extensions["x-kubernetes-list-type"]; got != c.listType {
			t.Errorf("%s.%s x-kubernetes-list-type = %v, want %q", c.def, c.prop, got, c.listType)
		}
		got := p.Extensions["x-kubernetes-list-map-keys"]
		if c.mapKeys == nil {
			if got != nil {
				t.Errorf("%s.%s x-kubernetes-list-map-keys = %v, want none", c.def, c.prop, got)
			}
			continue
		}
		if !reflect.DeepEqual(got, c.mapKeys) {
			t.Errorf("%s.%s x-kubernetes-list-map-keys = %#v, want %#v", c.def, c.prop, got, c.mapKeys)
		}
	}
	// IntOrString is described by its format plus a v3 oneOf of integer|string.
	ios := defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"].Schema
	if ios.Format != "int-or-string" {
		t.Errorf("IntOrString format = %q, want %q", ios.Format, "int-or-string")
	}
	if len(ios.OneOf) != 2 {
		t.Errorf("IntOrString oneOf has %d entries, want 2", len(ios.OneOf))
	}
}

// TestDefinitionNamerLinesUp builds the v2 definitions for a Service the way
// genericapiserver does (DefaultOpenAPIConfig's GetDefinitions and
// GetDefinitionName), proving the generated keys match the names
// NewDefinitionNamer derives from a scheme.
func TestDefinitionNamerLinesUp(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	namer := apiopenapi.NewDefinitionNamer(scheme)

	name, ext := namer.GetDefinitionName("io.k8s.api.core.v1.Service")
	if name != "io.k8s.api.core.v1.Service" {
		t.Errorf("GetDefinitionName renamed Service to %q", name)
	}
	if _, ok := ext["x-kubernetes-group-version-kind"]; !ok {
		t.Errorf("GetDefinitionName gave no GVK extension for Service: %v", ext)
	}

	cfg := &common.Config{
		GetDefinitions:    GetOpenAPIDefinitions,
		GetDefinitionName: namer.GetDefinitionName,
		Info:              &spec.Info{InfoProps: spec.InfoProps{Title: "kubeboot", Version: "test"}},
	}
	built, err := builder.BuildOpenAPIDefinitionsForResource(&corev1.Service{}, cfg)
	if err != nil {
		t.Fatalf("BuildOpenAPIDefinitionsForResource: %v", err)
	}
	svc, ok := (*built)["io.k8s.api.core.v1.Service"]
	if !ok {
		t.Fatalf("built definitions lack io.k8s.api.core.v1.Service; have %d entries", len(*built))
	}
	gvks, ok := svc.Extensions["x-kubernetes-group-version-kind"].([]interface{})
	if !ok || len(gvks) != 1 {
		t.Fatalf("Service x-kubernetes-group-version-kind = %#v", svc.Extensions["x-kubernetes-group-version-kind"])
	}
	for _, dep := range []string{"io.k8s.api.core.v1.ServiceSpec", "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"} {
		if _, ok := (*built)[dep]; !ok {
			t.Errorf("built definitions lack %s", dep)
		}
	}
}
