//go:build !linux

package memorytest

import "time"

// ThreadCPU is not available on this platform.
func ThreadCPU() (time.Duration, bool) { return 0, false }
