// Package allocator holds what the ClusterIP and NodePort allocators share:
// the errors whose messages users see, matching kube-apiserver's.
package allocator

import (
	"errors"
	"fmt"
)

// Errors returned by the allocators. Their texts are kube-apiserver's.
var (
	// ErrAllocated: the requested IP or port is held by another Service.
	ErrAllocated = errors.New("provided IP is already allocated")
	// ErrPortAllocated is ErrAllocated for ports.
	ErrPortAllocated = errors.New("provided port is already allocated")
	// ErrFull: no free address or port is left.
	ErrFull = errors.New("range is full")
	// ErrNotInNetwork: a requested IP lies outside every Service range.
	ErrNotInNetwork = errors.New("the provided network does not match the current range")
)

// PortNotInRangeError: a requested port is outside --service-node-port-range.
type PortNotInRangeError struct {
	// ValidPorts is the range, "30000-32767".
	ValidPorts string
}

func (e *PortNotInRangeError) Error() string {
	return fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %s", e.ValidPorts)
}

// IPNotInRangeError: a requested IP is in the Service network but not
// usable (its network or broadcast address).
type IPNotInRangeError struct {
	IP         string
	ValidRange string
}

func (e *IPNotInRangeError) Error() string {
	return fmt.Sprintf("the provided IP (%s) is not in the valid range. The range of valid IPs is %s", e.IP, e.ValidRange)
}
