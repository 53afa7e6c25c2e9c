//go:build linux

package memorytest

import (
	"syscall"
	"time"
	"unsafe"
)

const clockThreadCPUTimeID = 3 // CLOCK_THREAD_CPUTIME_ID

// ThreadCPU returns the CPU time the calling OS thread has used; with
// runtime.LockOSThread around a measured call, the difference is the call's
// on-CPU time, which (unlike wall time) does not grow when other processes
// compete for the cores. ok is false where it is not available.
func ThreadCPU() (d time.Duration, ok bool) {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
