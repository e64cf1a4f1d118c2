package simulatednodes

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kubeboot/kubeboot/internal/platform/sharedobjects"
)

// pooledClient is the clientset kwok is given: the Nodes and Pods its
// watches decode are the process's shared copies (sharedobjects), as the
// other components' informers' are, instead of a copy of every Node and of
// every Pod in flight of its own (~8 KB a Node version). kwok treats them
// as read-only, as client-go's informers require: it deep-copies before it
// changes one, and its patches are computed, not applied to its copy.
// Lists are left alone: their items are values in one slice, and kwok
// lists only when a watch starts.
type pooledClient struct {
	kubernetes.Interface
	pool *sharedobjects.Pool
}

func (c pooledClient) CoreV1() typedcorev1.CoreV1Interface {
	return pooledCoreV1{c.Interface.CoreV1(), c.pool}
}

type pooledCoreV1 struct {
	typedcorev1.CoreV1Interface
	pool *sharedobjects.Pool
}

func (c pooledCoreV1) Nodes() typedcorev1.NodeInterface {
	return pooledNodes{c.CoreV1Interface.Nodes(), c.pool}
}

func (c pooledCoreV1) Pods(namespace string) typedcorev1.PodInterface {
	return pooledPods{c.CoreV1Interface.Pods(namespace), c.pool}
}

type pooledNodes struct {
	typedcorev1.NodeInterface
	pool *sharedobjects.Pool
}

func (n pooledNodes) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := n.NodeInterface.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return share(w, n.pool, opts, nodeAttributes), nil
}

type pooledPods struct {
	typedcorev1.PodInterface
	pool *sharedobjects.Pool
}

func (p pooledPods) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := p.PodInterface.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return share(w, p.pool, opts, podAttributes), nil
}

// attributes are what a watch's selectors are matched against: an
// object's labels and its selectable fields, read in place rather than
// copied into a map (the pool may ask on every event). It answers false
// for an object of another type; its Fields, even for nil, has exactly
// the fields it can read.
type attributes func(obj any) (labels.Set, fields.Fields, bool)

func nodeAttributes(obj any) (labels.Set, fields.Fields, bool) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil, nodeFields{}, false
	}
	return node.Labels, nodeFields{node}, true
}

// nodeFields are a Node's selectable fields that kwok's selectors use.
type nodeFields struct{ node *corev1.Node }

func (f nodeFields) Has(field string) bool { return field == "metadata.name" }

func (f nodeFields) Get(field string) string {
	if field == "metadata.name" && f.node != nil {
		return f.node.Name
	}
	return ""
}

func podAttributes(obj any) (labels.Set, fields.Fields, bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, podFields{}, false
	}
	return pod.Labels, podFields{pod}, true
}

// podFields are a Pod's selectable fields that kwok's selectors use.
type podFields struct{ pod *corev1.Pod }

func (f podFields) Has(field string) bool {
	switch field {
	case "metadata.name", "metadata.namespace", "spec.nodeName", "status.phase":
		return true
	}
	return false
}

func (f podFields) Get(field string) string {
	if f.pod == nil {
		return ""
	}
	switch field {
	case "metadata.name":
		return f.pod.Name
	case "metadata.namespace":
		return f.pod.Namespace
	case "spec.nodeName":
		return f.pod.Spec.NodeName
	case "status.phase":
		return string(f.pod.Status.Phase)
	}
	return ""
}

// share is w with its objects shared through pool: as an unselected
// informer's when opts select everything, and otherwise with the watch's
// selectors as the predicate the pool needs (sharedobjects.Pool.Selected).
// A selector on a field attrs does not give leaves w as it is: the field
// would read as empty and the predicate could answer wrongly.
func share(w watch.Interface, pool *sharedobjects.Pool, opts metav1.ListOptions, attrs attributes) watch.Interface {
	if opts.LabelSelector == "" && opts.FieldSelector == "" {
		return sharedobjects.Watch(w, pool.Transform)
	}
	labelSelector, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return w
	}
	fieldSelector, err := fields.ParseSelector(opts.FieldSelector)
	if err != nil {
		return w
	}
	_, readable, _ := attrs(nil)
	for _, r := range fieldSelector.Requirements() {
		if !readable.Has(r.Field) {
			return w
		}
	}
	return sharedobjects.Watch(w, pool.Selected(func(obj any) bool {
		l, f, ok := attrs(obj)
		return ok && labelSelector.Matches(l) && fieldSelector.Matches(f)
	}))
}
