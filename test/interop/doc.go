// Package interop runs real consumers of the Kubernetes API, built from
// their published modules, against an in-process kubeboot server
// (kubeboottest), the way an operator's own test suite would.
//
// The controller-runtime test installs a CRD from testdata/crds, builds a
// manager with leader election on a coordination.k8s.io Lease, and runs a
// reconciler for a hand-written typed API (no code generation) that owns a
// ConfigMap and writes through the status subresource. It checks the
// informer-backed cache, the uncached API reader with a field selector,
// Events, schema validation errors and the release of the Lease on a clean
// shutdown.
//
// The test server runs no controllers (kubeboottest's default), so no
// garbage collector: nothing here expects owned objects to go when their
// owner does.
package interop
