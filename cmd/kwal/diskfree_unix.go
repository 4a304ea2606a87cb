//go:build unix

package main

import "golang.org/x/sys/unix"

// diskFree returns the bytes free to this user on the file system holding
// path (which must exist), and whether it could tell.
func diskFree(path string) (uint64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true //nolint:unconvert // Bsize's type differs by OS
}
