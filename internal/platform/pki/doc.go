// Package pki creates and reuses kubeboot's certificates: a cluster CA, the
// apiserver's serving certificate and the admin client certificate, plus
// the admin kubeconfig. Keys are ECDSA P-256 (fast to generate, accepted by
// every Kubernetes client); private keys and kubeconfigs are written 0600.
package pki
