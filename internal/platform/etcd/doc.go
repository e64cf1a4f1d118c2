// Package etcd runs an etcd member inside the kubeboot process.
//
// By default the member listens on no TCP port at all: the apiserver talks
// to it through an in-process client (function calls, no gRPC sockets), and
// a unix socket in the data directory lets etcdctl inspect it. Tests and
// multi-member clusters add client and peer URLs. etcd's own logs are kept
// at error level so a normal start and stop print nothing.
package etcd
