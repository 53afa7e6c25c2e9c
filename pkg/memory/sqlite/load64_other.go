//go:build !(386 || amd64 || arm64 || ppc64le)

package sqlite

import (
	"encoding/binary"
	"unsafe"
)

// load64 is the little-endian uint64 at byte at of base (the caller has
// checked that the eight bytes are there).
func load64(base unsafe.Pointer, at uint) uint64 {
	return binary.LittleEndian.Uint64(unsafe.Slice((*byte)(unsafe.Add(base, at)), 8))
}
