//go:build linux

package mmapfile

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on the platforms Go
// supports for Linux on amd64 and arm64 with 4 KiB base pages.
const hugePage = 2 << 20

// readHuge reads size bytes of f into private anonymous memory aligned to
// a huge page and advised MADV_HUGEPAGE, so that the kernel backs it with
// transparent huge pages where it can (the "madvise" and "always" modes).
func readHuge(f *os.File, size int64) ([]byte, func() error, error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, nil, errNotMappable
	}
	n := (int(size) + hugePage - 1) &^ (hugePage - 1)
	mem, err := unix.Mmap(-1, 0, n+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, err
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	off := int((start+hugePage-1)&^(hugePage-1) - start)
	data := mem[off : off+n]
	// Advice is best effort: without it the copy is still correct.
	_ = unix.Madvise(data, unix.MADV_HUGEPAGE)
	if _, err := f.ReadAt(data[:size], 0); err != nil {
		unix.Munmap(mem)
		return nil, nil, err
	}
	// Read-only from here on, as a file mapping is.
	if err := unix.Mprotect(data, unix.PROT_READ); err != nil {
		unix.Munmap(mem)
		return nil, nil, err
	}
	return data[:size:size], func() error { return unix.Munmap(mem) }, nil
}

// dropCached asks the kernel to drop the page cache's clean pages of f
// that no process maps (POSIX_FADV_DONTNEED); best effort.
func dropCached(f *os.File) { _ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) }
