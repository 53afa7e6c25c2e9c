//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package sqlite

import "unsafe"

// load64 is the little-endian uint64 at byte at of base (the caller has
// checked that the eight bytes are there): one load on a little-endian
// machine.
func load64(base unsafe.Pointer, at uint) uint64 {
	return *(*uint64)(unsafe.Add(base, at))
}
