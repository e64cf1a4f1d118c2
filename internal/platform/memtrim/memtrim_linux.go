//go:build linux

package memtrim

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ReleaseStartupPages asks the kernel to reclaim the executable's read-only
// pages from this process now (MADV_PAGEOUT, Linux 5.4+). Pages still in
// use fault back in from the page cache, one at a time: the mappings are
// also marked MADV_RANDOM, which stops the kernel from mapping the
// neighbours of every faulting page ("fault-around", 64 KiB), so what
// becomes resident again is what the running server touches rather than
// a multiple of it. It returns how many bytes of mappings were advised.
//
// The kernel does not page out dirty pages, and an executable written
// moments ago (as `go run` does) stays dirty in the page cache until
// writeback, up to 30 s later: its pages are written back first. For an
// installed executable that costs nothing.
func ReleaseStartupPages() (uint64, error) {
	ranges, err := executableRanges()
	if err != nil {
		return 0, err
	}
	var total uint64
	var errs []error
	if err := syncExecutable(); err != nil {
		errs = append(errs, err)
	}
	for _, r := range ranges {
		if err := madvise(r, unix.MADV_RANDOM); err != nil {
			errs = append(errs, err)
		}
		if err := madvise(r, unix.MADV_PAGEOUT); err != nil {
			errs = append(errs, err)
			continue
		}
		total += r.End - r.Start
	}
	return total, errors.Join(errs...)
}

// syncExecutable writes the executable's dirty pages back to disk.
func syncExecutable() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	f, err := os.Open(exe)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("writing back %s: %w", exe, err)
	}
	return nil
}

// madvise advises on a range of the process's own mappings, by address:
// the executable's pages are not Go memory.
func madvise(r ExecutableRange, advice int) error {
	_, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(r.Start), uintptr(r.End-r.Start), uintptr(advice))
	if errno != 0 {
		return errno
	}
	return nil
}
