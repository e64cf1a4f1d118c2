//go:build !linux

package embedded

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// errNotLinux: containerd runs Linux nodes only.
var errNotLinux = errors.New("containerd runs on Linux only")

// Containerd reports that containerd runs on Linux only.
func Containerd(context.Context, []string) error { return errNotLinux }

// Ctr reports that containerd runs on Linux only.
func Ctr(context.Context, []string) error { return errNotLinux }

// Shim reports that containerd runs on Linux only, and exits.
func Shim(context.Context) {
	fmt.Fprintln(os.Stderr, ShimName+":", errNotLinux)
	os.Exit(1)
}
