// Package etcdstore connects the generic registry to etcd: it lays out keys as
// kube-apiserver does (so data is compatible both ways), stores objects as
// protobuf in their v1 version, and shares one etcd client across every
// resource instead of dialling a connection per resource.
package etcdstore
