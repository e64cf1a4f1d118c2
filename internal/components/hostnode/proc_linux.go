package hostnode

import "syscall"

// dieWithParent has the kernel send the kubelet SIGTERM if this process
// dies without stopping it.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
