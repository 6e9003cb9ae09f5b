// Package mmapfile opens a file as a read-only region: memory-mapped where
// the platform allows it (unix), read through the open file elsewhere or
// when mapping fails. Checkpoint readers and the artifact use it, so weights
// are paged in by the OS instead of copied.
package mmapfile

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// Region is an opened file.
type Region struct {
	// Data is the whole file when it is mapped, else nil. It is read-only
	// memory: writing to it faults. It is invalid after Close.
	Data []byte
	// Size is the file size in bytes.
	Size int64

	r     io.ReaderAt
	close func() error
}

// ReadAt reads from the region (the mapping or the file).
func (r *Region) ReadAt(p []byte, off int64) (int, error) { return r.r.ReadAt(p, off) }

// Close unmaps or closes the file.
func (r *Region) Close() error {
	if r.close == nil {
		return nil
	}
	err := r.close()
	r.close = nil
	return err
}

// Open opens path read-only, mapped where possible.
func Open(path string) (*Region, error) {
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
	if data, unmap, err := mapFile(f, size); err == nil {
		f.Close() // the mapping outlives the descriptor
		return &Region{Data: data, Size: size, r: bytes.NewReader(data), close: unmap}, nil
	}
	return &Region{Size: size, r: f, close: f.Close}, nil
}

// errNotMappable is returned by mapFile for sizes a mapping cannot hold.
var errNotMappable = fmt.Errorf("file size not mappable")

// Release tells the OS that bytes [off, off+n) of the region will not be
// read again soon: the whole pages among them are dropped from this
// process's resident memory (the data stays in the file and the page
// cache, and a later read maps it back in). Streaming readers call it
// after converting a tensor, so that the mapped pages of a checkpoint do
// not add up to the model's size. It does nothing when the region is not
// mapped, and ignores a range outside the file.
func (r *Region) Release(off, n int64) {
	if r.Data == nil || off < 0 || n <= 0 || off > int64(len(r.Data))-n {
		return
	}
	release(r.Data[off : off+n])
}
