//go:build unix && !linux

package mmapfile

import (
	"os"

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

// hugeMapped is Linux only.
func hugeMapped([]byte) int64 { return 0 }

// hugePagesAvailable: transparent huge pages are Linux's.
func hugePagesAvailable() bool { return false }
