//go:build linux || darwin || freebsd || netbsd || openbsd

package natsembed

import "golang.org/x/sys/unix"

// FreeBytes is the space an unprivileged writer may still use on dir's
// volume, -1 when it cannot be read.
func FreeBytes(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(uint64(st.Bavail) * uint64(st.Bsize))
}
