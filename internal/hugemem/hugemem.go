// Package hugemem allocates large working buffers (a session's KV cache)
// from the Go heap in memory advised for transparent huge pages, on Linux.
//
// A one-token decode step writes one position of every cached column and
// attention reads every column: over a cache of tens or hundreds of MiB in
// 4 KiB pages nearly every column is a TLB miss. In 2 MiB pages they are
// 512 times fewer. The memory stays the garbage collector's: a buffer is
// freed when no slice of it is left, like any other.
package hugemem

import "unsafe"

// pageSize is the size of a transparent huge page on the platforms Go
// supports for Linux on amd64 and arm64 with 4 KiB base pages.
const pageSize = 2 << 20

// minAdvised is the smallest buffer worth aligning and advising: below a
// few huge pages the rounding wastes more than the pages save.
const minAdvised = 4 * pageSize

// Bytes returns n zero bytes. From minAdvised bytes on, on Linux, they
// start at a huge-page boundary and are advised MADV_HUGEPAGE, so that
// the kernel backs them with huge pages where its transparent huge pages
// are in "madvise" or "always" mode (advice is best effort: the bytes are
// the same without it).
func Bytes(n int) []byte {
	if n < minAdvised || !advisable {
		return make([]byte, n)
	}
	b := make([]byte, n+pageSize)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	off := int((pageSize - start%pageSize) % pageSize)
	b = b[off : off+n : off+n]
	advise(b[:n&^(pageSize-1)])
	return b
}

// Uint16s returns n zero uint16 values in memory as Bytes gives it.
func Uint16s(n int) []uint16 {
	b := Bytes(2 * n)
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// Uint8s returns n zero bytes as Bytes gives them.
func Uint8s(n int) []uint8 { return Bytes(n) }

// Float32s returns n zero float32 values in memory as Bytes gives it.
func Float32s(n int) []float32 {
	b := Bytes(4 * n)
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), n)
}
