//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package natsembed

// FreeBytes cannot read the free space here: -1 (the guard then restarts
// JetStream without waiting for space).
func FreeBytes(string) int64 { return -1 }
