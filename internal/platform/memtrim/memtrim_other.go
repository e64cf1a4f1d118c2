//go:build !linux

package memtrim

// ReleaseStartupPages does nothing outside Linux.
func ReleaseStartupPages() (uint64, error) { return 0, nil }
