// Package repair holds what the Service allocators' repair loops share:
// Event reasons and metrics, as kube-apiserver's. The errors users see are
// upstream's (k8s.io/kubernetes/pkg/registry/core/service/portallocator).
package repair
