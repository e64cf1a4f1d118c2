package kubecontrollermanager

import (
	"context"
	"fmt"
	"sync"
	"time"

	apiextensionsscheme "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/scheme"
	"k8s.io/apimachinery/pkg/runtime/schema"
	pluginvalidatingadmissionpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery"
	k8sscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/validation/spec"
	cmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
	"k8s.io/kubernetes/pkg/controller/validatingadmissionpolicystatus"
	"k8s.io/kubernetes/pkg/generated/openapi"
	"k8s.io/utils/clock"
)

// schemaIdle is how long the policy status controller keeps the built-in
// types' schemas after its last look-up.
const schemaIdle = time.Minute

// newPolicyStatusController builds the ValidatingAdmissionPolicy status
// controller (validatingadmissionpolicy-status-controller), which
// type-checks each policy's expressions against the schemas of the types
// it matches, as upstream's descriptor does with one difference: the
// built-in types' schemas are built when a policy is checked and dropped
// once no check has needed them for schemaIdle (schemaOnDemand).
// Upstream's resolver holds every generated OpenAPI definition for the
// life of the process: ~6 MB of live heap, a tenth of an idle server's,
// for a controller that works only when a policy changes. It is nil when
// the controller is off.
func newPolicyStatusController(cctx cmapp.ControllerContext) (cmapp.Controller, error) {
	if !cctx.IsControllerEnabled(cmapp.NewControllerDescriptors()[names.ValidatingAdmissionPolicyStatusController]) {
		return nil, nil
	}
	disco, err := cctx.ClientBuilder.DiscoveryClient(names.ValidatingAdmissionPolicyStatusController)
	if err != nil {
		return nil, fmt.Errorf("%s: discovery client: %w", names.ValidatingAdmissionPolicyStatusController, err)
	}
	client, err := cctx.NewClient(names.ValidatingAdmissionPolicyStatusController)
	if err != nil {
		return nil, err
	}
	typeChecker := &pluginvalidatingadmissionpolicy.TypeChecker{
		SchemaResolver: newSchemaOnDemand(clock.RealClock{}, schemaIdle, upstreamResolver(disco)),
		RestMapper:     cctx.RESTMapper,
	}
	c, err := validatingadmissionpolicystatus.NewController(
		cctx.InformerFactory.Admissionregistration().V1().ValidatingAdmissionPolicies(),
		client.AdmissionregistrationV1().ValidatingAdmissionPolicies(),
		typeChecker)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", names.ValidatingAdmissionPolicyStatusController, err)
	}
	return policyStatusController{c, int(cctx.ComponentConfig.ValidatingAdmissionPolicyStatusController.ConcurrentPolicySyncs)}, nil
}

// upstreamResolver builds the resolver upstream's descriptor gives the
// controller: the built-in types from the generated definitions,
// everything else (CRDs) from discovery.
func upstreamResolver(disco discovery.DiscoveryInterface) func() resolver.SchemaResolver {
	return func() resolver.SchemaResolver {
		return resolver.NewDefinitionsSchemaResolver(openapi.GetOpenAPIDefinitions, k8sscheme.Scheme, apiextensionsscheme.Scheme).
			Combine(&resolver.ClientDiscoveryResolver{Discovery: disco})
	}
}

// policyStatusController is the policy status controller as a
// cmapp.Controller.
type policyStatusController struct {
	status  *validatingadmissionpolicystatus.Controller
	workers int
}

func (policyStatusController) Name() string { return names.ValidatingAdmissionPolicyStatusController }

func (c policyStatusController) Run(ctx context.Context) { c.status.Run(ctx, c.workers) }

// schemaOnDemand is a resolver built at its first look-up and released
// once idle has passed without one, so that what it holds is in memory
// only while it is used.
type schemaOnDemand struct {
	clock clock.WithDelayedExecution
	idle  time.Duration
	build func() resolver.SchemaResolver

	mu       sync.Mutex
	resolver resolver.SchemaResolver // nil while released
	release  clock.Timer
	lookups  uint64 // numbers the look-ups, so that only the last one's timer releases
}

func newSchemaOnDemand(c clock.WithDelayedExecution, idle time.Duration, build func() resolver.SchemaResolver) *schemaOnDemand {
	return &schemaOnDemand{clock: c, idle: idle, build: build}
}

// ResolveSchema resolves gvk with the resolver, built if it is released,
// and puts its release off by idle.
func (s *schemaOnDemand) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	return s.acquire().ResolveSchema(gvk)
}

func (s *schemaOnDemand) acquire() resolver.SchemaResolver {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resolver == nil {
		s.resolver = s.build()
	}
	if s.release != nil {
		s.release.Stop()
	}
	s.lookups++
	lookup := s.lookups
	s.release = s.clock.AfterFunc(s.idle, func() { s.releaseAfter(lookup) })
	return s.resolver
}

// releaseAfter releases the resolver if lookup was the last look-up: a
// timer that fired while a later look-up waited for the lock has been
// replaced.
func (s *schemaOnDemand) releaseAfter(lookup uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lookups == lookup {
		s.resolver = nil
		s.release = nil
	}
}
