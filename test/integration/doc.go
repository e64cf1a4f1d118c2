// Package integration runs kubeboot apiserver processes against one etcd
// and checks what only several real processes can show: endpoints that
// follow the live apiservers through kills and restarts. Tests that need
// several advertise addresses run in a private network namespace.
package integration
