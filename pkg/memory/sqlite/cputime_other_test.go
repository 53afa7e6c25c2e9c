//go:build !linux

package sqlite

import "time"

// processCPU is not measured off Linux (the metric reads 0).
func processCPU() time.Duration { return 0 }
