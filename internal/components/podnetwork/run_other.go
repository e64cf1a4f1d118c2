//go:build !linux

package podnetwork

import (
	"context"
	"errors"
)

// errNotLinux: flannel programs Linux's network.
var errNotLinux = errors.New("the pod network runs only on Linux")

// CheckCNIConf reports that no node runs here.
func CheckCNIConf(string) error { return errNotLinux }

// Run reports that no node runs here.
func Run(context.Context, Node) error { return errNotLinux }
