//go:build unix

package artifact

import (
	"bytes"
	"os"

	"golang.org/x/sys/unix"
)

// openSource maps path read-only. It falls back to ReadAt on the open file
// when the file is empty, too large for the address space, or cannot be
// mapped.
func openSource(path string) (*source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	size := st.Size()
	if size <= 0 || int64(int(size)) != size {
		return &source{r: f, size: size, closeFn: f.Close}, nil
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return &source{r: f, size: size, closeFn: f.Close}, nil
	}
	f.Close()
	return &source{data: data, r: bytes.NewReader(data), size: size, closeFn: func() error { return unix.Munmap(data) }}, nil
}

// syncDir flushes the directory entry of a just-renamed file to disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
