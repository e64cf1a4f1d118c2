// Package simulated says what marks a node as simulated, for the API
// server (which answers a simulated node's logs and exec requests itself),
// the simulated nodes (which create such nodes) and the components that
// leave them out or serve only them (local storage) alike.
package simulated

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// A node annotated NodeAnnotation=NodeAnnotationValue is played by kwok's
// controllers (kubeboot's --simulated-nodes, or any kwok): no kubelet
// serves it.
const (
	NodeAnnotation      = "kwok.x-k8s.io/node"
	NodeAnnotationValue = "fake"
)

// Node reports whether a node with these annotations is simulated.
func Node(annotations map[string]string) bool {
	return annotations[NodeAnnotation] == NodeAnnotationValue
}

// A node labelled TypeLabel=TypeValue is kwok's, as kwok labels its
// nodes and kwok users' manifests select them.
const (
	TypeLabel = "type"
	TypeValue = "kwok"
)

// NodeSelector selects the simulated nodes, as a label selector's string.
func NodeSelector() string { return labels.SelectorFromSet(labels.Set{TypeLabel: TypeValue}).String() }

// Selected reports whether obj is a Node NodeSelector selects: the
// predicate of an informer watching with it (sharedobjects.Pool.Selected).
func Selected(obj any) bool {
	node, ok := obj.(*corev1.Node)
	return ok && node.Labels[TypeLabel] == TypeValue
}
