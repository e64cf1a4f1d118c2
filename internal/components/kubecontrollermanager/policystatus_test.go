package kubecontrollermanager

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/kube-openapi/pkg/validation/spec"
	testingclock "k8s.io/utils/clock/testing"
)

// fixedResolver resolves every kind to a schema titled with its name.
type fixedResolver struct{}

func (fixedResolver) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	return &spec.Schema{SchemaProps: spec.SchemaProps{Title: gvk.Kind}}, nil
}

func TestSchemaOnDemand(t *testing.T) {
	const idle = time.Minute
	clock := testingclock.NewFakeClock(time.Now())
	builds := 0
	s := newSchemaOnDemand(clock, idle, func() resolver.SchemaResolver {
		builds++
		return fixedResolver{}
	})
	deployment := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	steps := []struct {
		name    string
		advance time.Duration // before the look-up
		builds  int           // after it
	}{
		{"the first look-up builds", 0, 1},
		{"a look-up within idle reuses", idle - time.Second, 1},
		{"each look-up puts the release off", idle - time.Second, 1},
		{"a look-up after idle builds again", idle, 2},
		{"and is reused", time.Second, 2},
	}
	for _, step := range steps {
		clock.Step(step.advance)
		got, err := s.ResolveSchema(deployment)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got.Title != "Deployment" {
			t.Errorf("%s: resolved %q, want the resolver's Deployment", step.name, got.Title)
		}
		if builds != step.builds {
			t.Errorf("%s: %d builds, want %d", step.name, builds, step.builds)
		}
	}
	clock.Step(idle)
	s.mu.Lock()
	released := s.resolver == nil
	s.mu.Unlock()
	if !released {
		t.Error("the resolver is still held after idle without a look-up")
	}
}

// TestSchemaOnDemandStaleRelease checks that the release of an earlier
// look-up that fired while a later one held the lock does not release
// the resolver the later one put off.
func TestSchemaOnDemandStaleRelease(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Now())
	builds := 0
	s := newSchemaOnDemand(clock, time.Minute, func() resolver.SchemaResolver {
		builds++
		return fixedResolver{}
	})
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	if _, err := s.ResolveSchema(gvk); err != nil {
		t.Fatal(err)
	}
	first := s.lookups
	if _, err := s.ResolveSchema(gvk); err != nil {
		t.Fatal(err)
	}
	s.releaseAfter(first) // the first look-up's timer, fired late
	if _, err := s.ResolveSchema(gvk); err != nil {
		t.Fatal(err)
	}
	if builds != 1 {
		t.Errorf("%d builds, want 1: a replaced timer released the resolver", builds)
	}
}
