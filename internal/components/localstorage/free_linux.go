package localstorage

import "golang.org/x/sys/unix"

// available is how many bytes an unprivileged writer may still write on
// dir's filesystem.
func available(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}
