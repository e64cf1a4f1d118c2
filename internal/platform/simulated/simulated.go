// Package simulated says what marks a node as simulated, for the API
// server (which answers a simulated node's logs and exec requests itself)
// and the simulated nodes (which create such nodes) alike.
package simulated

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
