//go:build unix

package mmapfile

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// release advises the kernel that the whole pages inside b, a part of a
// file mapping, are not needed (on anonymous memory it would discard data).
func release(b []byte) {
	if len(b) == 0 {
		return
	}
	page := uintptr(unix.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (start + page - 1) &^ (page - 1)
	hi := (start + uintptr(len(b))) &^ (page - 1)
	if hi <= lo {
		return
	}
	// an error (memory not mapped) means there is nothing to release
	_ = unix.Madvise(b[lo-start:hi-start], unix.MADV_DONTNEED)
}
