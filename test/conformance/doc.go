// Package conformance runs upstream's [Conformance] suite (k8s.io/kubernetes
// v1.37.2's test/e2e, ginkgo) against a kubeboot cluster of two machines,
// each a network and mount namespace, on images built on the machine: no
// image is pulled from the Internet.
package conformance
