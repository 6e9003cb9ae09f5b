//go:build linux || android || darwin || freebsd || netbsd || openbsd || dragonfly

package gguf

import (
	"errors"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// mmapFile maps size bytes of f read-only and returns the mapping and its
// release function.
func mmapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if size <= 0 || size > math.MaxInt {
		return nil, nil, errors.New("size not mappable")
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return unix.Munmap(data) }, nil
}
