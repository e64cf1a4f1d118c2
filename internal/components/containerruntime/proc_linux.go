package containerruntime

import "syscall"

// dieWithParent has the kernel send containerd SIGTERM if this process
// dies without stopping it; the containers' shims live on.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
