//go:build !linux

package containerruntime

import "syscall"

// dieWithParent: only Linux nodes run containerd.
func dieWithParent() *syscall.SysProcAttr { return nil }
