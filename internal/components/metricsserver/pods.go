package metricsserver

import (
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// nodeNameIndex indexes Pods by the node they are bound to.
const nodeNameIndex = "spec.nodeName"

// podNodeName is nodeNameIndex's function.
func podNodeName(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil, nil
	}
	return []string{pod.Spec.NodeName}, nil
}

// runningPods lists a Pod cache's Running Pods as metrics-server's API
// reads them: the metadata of each (metrics-server's own informer
// watches Running Pods' metadata only). The metadata is the cached
// Pod's, not a copy: the API only reads it.
type runningPods struct {
	pods cache.Indexer
}

var _ cache.GenericLister = runningPods{}

// List implements cache.GenericLister.
func (l runningPods) List(selector labels.Selector) ([]runtime.Object, error) {
	return l.list(metav1.NamespaceAll, selector)
}

// Get implements cache.GenericLister: name is namespace/name.
func (l runningPods) Get(name string) (runtime.Object, error) {
	return l.get(name)
}

// ByNamespace implements cache.GenericLister.
func (l runningPods) ByNamespace(namespace string) cache.GenericNamespaceLister {
	return namespacedPods{l, namespace}
}

func (l runningPods) list(namespace string, selector labels.Selector) ([]runtime.Object, error) {
	var out []runtime.Object
	err := cache.ListAllByNamespace(l.pods, namespace, selector, func(obj any) {
		if pod := obj.(*corev1.Pod); pod.Status.Phase == corev1.PodRunning {
			out = append(out, metadata(pod))
		}
	})
	return out, err
}

func (l runningPods) get(key string) (runtime.Object, error) {
	obj, ok, err := l.pods.GetByKey(key)
	if err != nil {
		return nil, err
	}
	pod, _ := obj.(*corev1.Pod)
	if !ok || pod.Status.Phase != corev1.PodRunning {
		_, name, _ := cache.SplitMetaNamespaceKey(key)
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	return metadata(pod), nil
}

// namespacedPods are the Running Pods of one namespace.
type namespacedPods struct {
	runningPods
	namespace string
}

// List implements cache.GenericNamespaceLister.
func (l namespacedPods) List(selector labels.Selector) ([]runtime.Object, error) {
	return l.list(l.namespace, selector)
}

// Get implements cache.GenericNamespaceLister.
func (l namespacedPods) Get(name string) (runtime.Object, error) {
	return l.get(l.namespace + "/" + name)
}

// metadata is pod's metadata as a metadata informer holds it.
func metadata(pod *corev1.Pod) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: pod.ObjectMeta,
	}
}
