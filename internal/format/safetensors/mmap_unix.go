//go:build unix

package safetensors

import (
	"bytes"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openRegion maps path read-only. It falls back to ReadAt on the open file
// when the file is empty or cannot be mapped.
func openRegion(path string) (*region, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	size := st.Size()
	if size <= 0 || int64(int(size)) != size {
		return &region{r: f, size: size, close: f.Close}, nil
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return &region{r: f, size: size, close: f.Close}, nil
	}
	f.Close()
	return &region{
		data:  data,
		r:     bytes.NewReader(data),
		size:  size,
		close: func() error { return unix.Munmap(data) },
	}, nil
}
