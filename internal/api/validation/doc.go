// Package validation checks the v1 objects kubeboot serves the way
// kube-apiserver does, returning field.ErrorLists whose field paths and
// messages match kube-apiserver's for the common mistakes, so clients see
// the same 422 Invalid Status bodies.
//
// The code is kubeboot's own, written against the published k8s.io/api v1
// types and the generic checks in k8s.io/apimachinery (object metadata, DNS
// names, IPs, CIDRs); kube-apiserver's internal validation package is not
// used. Objects reach these functions already defaulted (see
// internal/api/defaults); checks that only the allocators can make (is a
// cluster IP or node port free and in range) are left to them.
package validation
