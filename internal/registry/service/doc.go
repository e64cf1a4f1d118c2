// Package service serves core/v1 Services. Creating, updating and deleting
// a Service assigns and frees its ClusterIPs and NodePorts through an
// Allocator, transactionally: an allocation made for a write that fails is
// reverted before the request returns.
package service
