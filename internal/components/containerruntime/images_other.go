//go:build !linux

package containerruntime

import "errors"

func newImageStore(string, string) (imageStore, func(), error) {
	return nil, nil, errors.New("containerd runs on Linux only")
}
