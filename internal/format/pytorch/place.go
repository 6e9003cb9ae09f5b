package pytorch

import (
	"archive/zip"
	"fmt"
	"hash/crc32"
	"io"
	"math/bits"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/tensor"
)

// placer resolves tensors to byte ranges of the archive.
type placer struct {
	files   map[string]*zip.File
	prefix  string
	size    int64
	offsets map[string]int64 // storage key -> data offset in the file
	name    string
	r       io.ReaderAt // the archive, whose storages' CRC-32s are checked
}

func (p *placer) bad(field, msg string, args ...any) error {
	return &format.Error{Format: formatName, File: p.name, Field: field, Msg: fmt.Sprintf(msg, args...)}
}

// place checks that tensor t lies inside its storage entry, which is stored
// uncompressed inside the file, and returns its listing.
func (p *placer) place(name string, t *tensorRef) (*entry, error) {
	dt, ok := storageDType(t.storage.class)
	if !ok {
		return nil, &format.UnsupportedError{Format: formatName, File: p.name,
			What: fmt.Sprintf("tensor %q: storage type %s", name, t.storage.class)}
	}
	esize := int64(dt.BlockBytes())
	entryName := p.prefix + "data/" + t.storage.key
	f, ok := p.files[entryName]
	if !ok {
		return nil, p.bad(name, "storage %q missing from the archive", "data/"+t.storage.key)
	}
	if f.Method != zip.Store {
		return nil, &format.UnsupportedError{Format: formatName, File: p.name,
			What: fmt.Sprintf("tensor %q: storage %q is compressed (method %d)", name, entryName, f.Method)}
	}
	if f.UncompressedSize64 != f.CompressedSize64 || f.UncompressedSize64 > uint64(p.size) {
		return nil, p.bad(name, "storage %q size %d does not fit the %d-byte file", entryName, f.UncompressedSize64, p.size)
	}
	stBytes := int64(f.UncompressedSize64)
	off, ok := p.offsets[t.storage.key]
	if !ok {
		o, err := f.DataOffset()
		if err != nil {
			return nil, p.bad(name, "storage %q: %v", entryName, err)
		}
		if o < 0 || o > p.size-stBytes {
			return nil, p.bad(name, "storage %q at [%d,+%d) runs past the end of the %d-byte file", entryName, o, stBytes, p.size)
		}
		// the zip's CRC-32 is the only checksum of the weights: a flipped
		// byte would otherwise load and change the logits
		h := crc32.NewIEEE()
		if _, err := io.Copy(h, io.NewSectionReader(p.r, o, stBytes)); err != nil {
			return nil, p.bad(name, "storage %q: %v", entryName, err)
		}
		if got := h.Sum32(); got != f.CRC32 {
			return nil, p.bad(name, "storage %q is corrupt: CRC-32 %08x, the archive records %08x", entryName, got, f.CRC32)
		}
		off = o
		p.offsets[t.storage.key] = o
	}
	if t.storage.numel > stBytes/esize {
		return nil, p.bad(name, "storage %q declares %d elements, its %d bytes hold %d", entryName, t.storage.numel, stBytes, stBytes/esize)
	}
	n, err := tensor.NumElements(t.size)
	if err != nil {
		return nil, p.bad(name, "size: %v", err)
	}
	nbytes, err := dt.ByteSize(n)
	if err != nil {
		return nil, p.bad(name, "size: %v", err)
	}
	if n > 0 {
		last, ok := lastElement(t.offset, t.size, t.stride)
		if !ok || last >= stBytes/esize {
			return nil, p.bad(name, "elements up to storage_offset %d + size %v x stride %v run past the storage's %d elements",
				t.offset, t.size, t.stride, stBytes/esize)
		}
	}
	return &entry{
		info: format.TensorInfo{
			Name:   name,
			DType:  dt,
			Shape:  append([]int64(nil), t.size...),
			Offset: off + t.offset*esize,
			Size:   nbytes,
		},
		contiguous: contiguous(t.size, t.stride),
		stride:     t.stride,
	}, nil
}

// lastElement returns offset + sum((size_i-1)*stride_i), false on overflow.
// All sizes are positive here.
func lastElement(offset int64, size, stride []int64) (int64, bool) {
	last := uint64(offset)
	for i := range size {
		hi, lo := bits.Mul64(uint64(size[i]-1), uint64(stride[i]))
		if hi != 0 || lo > 1<<62 {
			return 0, false
		}
		last += lo
		if last > 1<<62 {
			return 0, false
		}
	}
	return int64(last), true
}

// contiguous reports whether stride is row-major for size, ignoring
// dimensions of size 1 (whose stride never matters).
func contiguous(size, stride []int64) bool {
	want := int64(1)
	for i := len(size) - 1; i >= 0; i-- {
		if size[i] == 0 {
			return true
		}
		if size[i] != 1 && stride[i] != want {
			return false
		}
		want *= size[i]
	}
	return true
}
