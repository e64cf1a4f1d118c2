// Command build builds kubeboot into the directory it is given as the
// tests and releases build it (harness.Build: containerd's runc shim
// embedded) and prints the binary's path, for scripts that run it in a
// network namespace, where nothing can build.
package main

import (
	"fmt"
	"os"

	"github.com/kubeboot/kubeboot/test/harness"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: build DIR")
		os.Exit(2)
	}
	bin, err := harness.Build(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(bin)
}
