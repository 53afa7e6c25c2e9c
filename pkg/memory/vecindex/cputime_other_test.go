//go:build !linux

package vecindex

import "time"

var start = time.Now()

// threadCPU falls back to wall time where the thread clock is not wired up.
func threadCPU() time.Duration { return time.Since(start) }

func processCPU() time.Duration { return time.Since(start) }
