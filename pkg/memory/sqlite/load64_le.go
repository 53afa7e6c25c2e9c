//go:build 386 || amd64 || arm64 || ppc64le

package sqlite

import "unsafe"

// load64 is the little-endian uint64 at byte at of base (the caller has
// checked that the eight bytes are there): one load, on the little-endian
// machines whose loads need no alignment (elsewhere encoding/binary's
// bytes: mips and some arm trap or rotate unaligned words).
func load64(base unsafe.Pointer, at uint) uint64 {
	return *(*uint64)(unsafe.Add(base, at))
}
