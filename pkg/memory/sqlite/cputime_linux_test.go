package sqlite

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) of the whole process: a
// benchmark's own work, unaffected by other processes competing for the
// shared machine's cores.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
