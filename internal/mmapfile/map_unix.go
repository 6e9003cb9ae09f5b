//go:build unix

package mmapfile

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapFile maps size bytes of f read-only.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, nil, errNotMappable
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return unix.Munmap(data) }, nil
}

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
