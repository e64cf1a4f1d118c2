// Package registry holds what every resource's registry shares: a generic
// create/update/delete strategy driven by the resource's validation, and a
// constructor for k8s.io/apiserver's generic etcd-backed Store. Each served
// resource has its own package below this one (namespace, service, ...).
package registry
