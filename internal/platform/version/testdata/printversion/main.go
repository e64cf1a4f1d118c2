// Command printversion prints the commit and tree state version.Get
// reports, for TestVCSStamp.
package main

import (
	"fmt"

	"github.com/kubeboot/kubeboot/internal/platform/version"
)

func main() {
	info := version.Get()
	fmt.Println(info.GitCommit, info.GitTreeState)
}
