// Package sharedobjects lets the informers that share kubeboot's process
// (the apiserver's Node authorizer, kube-controller-manager's,
// kube-scheduler's, the components' and kwok's watches, through Watch)
// hold one copy of each Pod and Node version they all cache. Separate processes each decode and keep their own; in one
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
// client-go's consumers copy an object before changing it. An informer
// whose watch has a selector (kube-scheduler's Pods, which leave out
// finished ones) needs care: when an object stops matching, the apiserver
// tells such a watch DELETED with the object's previous content under the
// new resourceVersion, so its copy of that version may not be the
// version's content. Its transform (Selected) is given the selector as a
// predicate and holds its copies with it: another informer takes such a
// copy only if its own decoded object, the version's true content,
// matches the selector, since then the selected watch was sent that
// content too. A selected informer takes the copies other informers hold
// without a selector.
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
		pods:  versions[corev1.Pod]{held: map[version]copyOf[corev1.Pod]{}},
		nodes: versions[corev1.Node]{held: map[version]copyOf[corev1.Node]{}},
	}
}

// Transform is a cache.TransformFunc for the informers of the process's
// components that watch without a selector: obj without managedFields,
// and for a Pod or Node the copy another informer holds of the same
// version, if any; otherwise obj, now held.
func (p *Pool) Transform(obj any) (any, error) {
	return p.transform(obj, nil), nil
}

// Selected is Transform for an informer whose watch has a label or field
// selector, given as matches: whether an object is one the watch
// selects. Its copies are held with matches (see the package's doc).
func (p *Pool) Selected(matches func(obj any) bool) func(obj any) (any, error) {
	return func(obj any) (any, error) {
		return p.transform(obj, matches), nil
	}
}

// transform is Transform with selected nil, Selected's otherwise.
func (p *Pool) transform(obj any, selected func(any) bool) any {
	if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
		accessor.SetManagedFields(nil)
	}
	if p == nil {
		return obj
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		return p.pods.share(o, o.UID, o.ResourceVersion, selected)
	case *corev1.Node:
		return p.nodes.share(o, o.UID, o.ResourceVersion, selected)
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
	held map[version]copyOf[T]
}

// copyOf is a held copy: selected is the predicate of the selected
// informer that holds it, nil if it is the version's true content.
type copyOf[T any] struct {
	obj      weak.Pointer[T]
	selected func(any) bool
}

// share returns the held copy of obj's version if the caller may take it
// (see the package's doc), and otherwise obj, which it holds unless a
// copy of the version's true content is held already. selected is the
// caller's predicate if its watch has a selector. Objects without a UID
// or resourceVersion (never stored) are returned as they are.
func (vs *versions[T]) share(obj *T, uid types.UID, resourceVersion string, selected func(any) bool) *T {
	if uid == "" || resourceVersion == "" {
		return obj
	}
	v := version{uid, resourceVersion}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	held, ok := vs.held[v]
	if h := held.obj.Value(); ok && h != nil {
		switch {
		case held.selected == nil:
			return h
		case selected == nil && held.selected(obj):
			// obj is the version's true content and the selected watch
			// was sent it too: h is that content.
			vs.held[v] = copyOf[T]{obj: held.obj}
			return h
		case selected != nil:
			// Two selected watches' copies: either may be a previous
			// content; each keeps its own.
			return obj
		}
		// h may be a previous content: obj, the true one, replaces it.
	}
	vs.held[v] = copyOf[T]{obj: weak.Make(obj), selected: selected}
	// Once no informer holds obj, its entry goes, unless a newer copy of
	// the same version replaced it meanwhile.
	runtime.AddCleanup(obj, vs.forget, v)
	return obj
}

// forget drops v's entry if its copy is gone.
func (vs *versions[T]) forget(v version) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if vs.held[v].obj.Value() == nil {
		delete(vs.held, v)
	}
}

func (vs *versions[T]) len() int {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	return len(vs.held)
}
