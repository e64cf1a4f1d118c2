//go:build !linux

package localstorage

import "errors"

// available is not known off Linux, where no node runs.
func available(string) (int64, error) {
	return 0, errors.New("free space is known only on Linux")
}
