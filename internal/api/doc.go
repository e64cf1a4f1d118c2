// Package api builds the runtime.Scheme that kubeboot serves: the published
// k8s.io/api v1 types of every served group, the same Go types registered as
// each group's internal (hub) version, our v1 defaulting, the conversions
// between events.k8s.io/v1 and core/v1 Events, and the field selectors each
// kind supports.
//
// kube-apiserver keeps separate internal types in k8s.io/kubernetes; kubeboot
// does not depend on that module, so the versioned types serve as the hub.
// The scheme converts a type to "its own" internal version without a
// conversion function, which keeps the generic registry's decode -> hub ->
// encode flow intact at no cost.
package api
