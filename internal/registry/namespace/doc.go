// Package namespace serves core/v1 Namespaces with kube-apiserver's
// lifecycle: a new namespace carries the "kubernetes" finalizer and is
// Active; the first delete moves it to Terminating; it is removed from
// storage only once its spec.finalizers are empty (the namespace controller,
// which arrives with controller-manager, empties it after deleting the
// namespace's contents). The status and finalize subresources update only
// their part.
package namespace
