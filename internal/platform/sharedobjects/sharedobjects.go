// Package sharedobjects lets the informers that share kubeboot's process
// (the apiserver's Node authorizer, kube-controller-manager's and
// kube-scheduler's) hold one copy of each Pod and Node version they all
// cache. Separate processes each decode and keep their own; in one
// process the other copies are only memory, a sixth of the live heap at
// 6,000 Pods.
//
// A Pool's Transform is the informers' transform function. It drops
// managedFields, as both components' upstream informers already do for
// Pods, and then looks the object up by UID and resourceVersion, which
// name one version of one object: if another informer holds that
// version, the caller gets the held copy and its own decoded one becomes
// garbage. The pool refers to the copies weakly, so it keeps nothing
// alive that no informer holds.
//
// Sharing is safe because informers' objects are read-only by contract:
// client-go's consumers copy an object before changing it. One kind of
// informer must not add its copies: one whose watch has a selector
// (kube-scheduler's Pods, which leave out finished ones). When an object
// stops matching, the apiserver tells such a watch DELETED with the
// object's previous content under the new resourceVersion, so its copy of
// that version is not the version's content. It uses TransformSelected,
// which takes a held copy but never holds its own.
package sharedobjects

import (
	"runtime"
	"sync"
	"weak"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
)

// Pool holds weak references to the Pods and Nodes the process's
// informers cache. Its zero value is not usable; use New. A nil *Pool's
// Transform only drops managedFields.
type Pool struct {
	pods  versions[corev1.Pod]
	nodes versions[corev1.Node]
}

// New returns an empty pool.
func New() *Pool {
	return &Pool{
		pods:  versions[corev1.Pod]{held: map[version]weak.Pointer[corev1.Pod]{}},
		nodes: versions[corev1.Node]{held: map[version]weak.Pointer[corev1.Node]{}},
	}
}

// Transform is a cache.TransformFunc for the informers of the process's
// components that watch without a selector: obj without managedFields,
// and for a Pod or Node the copy another informer holds of the same
// version, if any; otherwise obj, now held.
func (p *Pool) Transform(obj any) (any, error) {
	return p.transform(obj, true), nil
}

// TransformSelected is Transform for an informer whose watch has a label
// or field selector: it takes a held copy, but never holds obj.
func (p *Pool) TransformSelected(obj any) (any, error) {
	return p.transform(obj, false), nil
}

func (p *Pool) transform(obj any, hold bool) any {
	if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
		accessor.SetManagedFields(nil)
	}
	if p == nil {
		return obj
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		return p.pods.share(o, o.UID, o.ResourceVersion, hold)
	case *corev1.Node:
		return p.nodes.share(o, o.UID, o.ResourceVersion, hold)
	}
	return obj
}

// Len is the number of Pod and Node versions the pool refers to, held or
// not yet cleaned up.
func (p *Pool) Len() int {
	return p.pods.len() + p.nodes.len()
}

// version names one version of one object.
type version struct {
	uid             types.UID
	resourceVersion string
}

// versions are the held copies of one type's objects, by version.
type versions[T any] struct {
	mu   sync.Mutex
	held map[version]weak.Pointer[T]
}

// share returns the held copy of obj's version if there is one, and
// otherwise obj, which it holds if hold is set. Objects without a UID or
// resourceVersion (never stored) are returned as they are.
func (vs *versions[T]) share(obj *T, uid types.UID, resourceVersion string, hold bool) *T {
	if uid == "" || resourceVersion == "" {
		return obj
	}
	v := version{uid, resourceVersion}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if held := vs.held[v].Value(); held != nil {
		return held
	}
	if !hold {
		return obj
	}
	vs.held[v] = weak.Make(obj)
	// Once no informer holds obj, its entry goes, unless a newer copy of
	// the same version replaced it meanwhile.
	runtime.AddCleanup(obj, vs.forget, v)
	return obj
}

// forget drops v's entry if its copy is gone.
func (vs *versions[T]) forget(v version) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if vs.held[v].Value() == nil {
		delete(vs.held, v)
	}
}

func (vs *versions[T]) len() int {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	return len(vs.held)
}
