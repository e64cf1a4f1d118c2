// Package reliability runs three kubeboot apiservers on a three-member etcd
// cluster (TLS between apiservers and etcd) inside a private network
// namespace, and checks what a user running beyond one machine must be
// able to trust: nothing acknowledged is lost and no allocation is held
// twice when an apiserver is killed under load, when etcd loses and
// regains quorum, and when every apiserver is restarted in turn.
package reliability
