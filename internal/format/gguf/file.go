package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/tensor"
)

// KV is one metadata entry. In a File (KVs) and for Write the value has its
// native type: uint8, int8, uint16, int16, uint32, int32, uint64, int64,
// float32, float64, bool, string, a slice of one of those (an array), or
// []any holding arrays (an array of arrays).
type KV struct {
	Key   string
	Value any
}

// File is an opened GGUF file. It implements format.Checkpoint and is safe
// for concurrent use until Close.
type File struct {
	name      string
	version   uint32
	alignment int64
	size      int64

	kvs     []KV           // file order, native values
	kvIndex map[string]int // key -> index in kvs

	metaOnce sync.Once
	meta     map[string]any // widened values, built on first use

	tensors   []format.TensorInfo // file order, absolute offsets
	types     []GGMLType          // parallel to tensors
	index     map[string]int      // name -> index in tensors
	dataStart int64

	r       io.ReaderAt
	mapped  []byte // whole file when memory-mapped; nil after Close
	closer  func() error
	release func(off, n int64) // drops mapped pages; nil when not mapped
	closed  bool
	mu      sync.RWMutex // guards mapped and closed against Close
}

var _ format.Checkpoint = (*File)(nil)

// Format returns "gguf".
func (f *File) Format() string { return "gguf" }

// Version returns the GGUF version of the file (2 or 3).
func (f *File) Version() uint32 { return f.version }

// Alignment returns the data alignment in bytes (general.alignment, default 32).
func (f *File) Alignment() int64 { return f.alignment }

// DataOffset returns the file offset of the data section.
func (f *File) DataOffset() int64 { return f.dataStart }

// KVs returns the metadata in file order with native value types, ready to
// be passed back to Write.
func (f *File) KVs() []KV { return slices.Clone(f.kvs) }

// Value returns the native value of key.
func (f *File) Value(key string) (any, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return nil, false
	}
	return f.kvs[i].Value, true
}

// Metadata returns every key with its scalar values widened: unsigned
// integers as uint64, signed as int64, floats as float64. Arrays keep their
// stored element type ([]uint8 ... []float64, []bool, []string; an array of
// arrays is []any of those) and share memory with KVs, so metadata costs
// what the file holds. The map is built once and shared; callers must not
// modify it or its arrays.
func (f *File) Metadata() map[string]any {
	f.metaOnce.Do(func() {
		f.meta = make(map[string]any, len(f.kvs))
		for _, kv := range f.kvs {
			f.meta[kv.Key] = widen(kv.Value)
		}
	})
	return f.meta
}

// Tensors lists every tensor in file order. Shapes are outermost first;
// Offset is absolute in the file. DType is tensor.Invalid for ggml types
// aotlm has no dtype for; TensorType gives the ggml type of every tensor.
func (f *File) Tensors() []format.TensorInfo { return slices.Clone(f.tensors) }

// TensorType returns the ggml type of the named tensor.
func (f *File) TensorType(name string) (GGMLType, bool) {
	i, ok := f.index[name]
	if !ok {
		return 0, false
	}
	return f.types[i], true
}

func (f *File) lookup(name string) (format.TensorInfo, GGMLType, error) {
	i, ok := f.index[name]
	if !ok {
		return format.TensorInfo{}, 0, fmt.Errorf("gguf: %s: no tensor %q", f.name, name)
	}
	return f.tensors[i], f.types[i], nil
}

// ErrClosed is returned by reads after Close.
var ErrClosed = errors.New("gguf: file closed")

// TensorData returns the stored bytes of the named tensor. For a memory-mapped
// file the slice aliases the read-only mapping (writing to it faults) and is
// valid until Close; otherwise it is a fresh copy.
func (f *File) TensorData(name string) ([]byte, error) {
	t, _, err := f.lookup(name)
	if err != nil {
		return nil, err
	}
	var out []byte
	err = f.view(t, func(b []byte) { out = b })
	return out, err
}

// view calls fn with the bytes of t while holding the file open, so a
// concurrent Close cannot unmap them mid-use.
func (f *File) view(t format.TensorInfo, fn func([]byte)) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return ErrClosed
	}
	if f.mapped != nil {
		fn(f.mapped[t.Offset : t.Offset+t.Size : t.Offset+t.Size])
		return nil
	}
	buf := make([]byte, t.Size)
	if n, err := f.r.ReadAt(buf, t.Offset); n < len(buf) {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("gguf: %s: tensor %q: reading %d bytes at %d: %w", f.name, t.Name, t.Size, t.Offset, err)
	}
	fn(buf)
	return nil
}

// ReadFloat32 reads the named tensor as float32. F32, F16, BF16 and the
// block types with a dequantizer (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q8_K,
// IQ4_NL, IQ4_XS, MXFP4) are decoded; other types give a
// *format.UnsupportedError. The mapped pages of F32, F16 and BF16 data are
// released (see Release) as they are converted.
func (f *File) ReadFloat32(name string) ([]float32, error) {
	t, typ, err := f.lookup(name)
	if err != nil {
		return nil, err
	}
	switch typ {
	case TypeF32, TypeF16, TypeBF16:
	default:
		if _, ok := dequantizers[typ]; ok {
			break
		}
		return nil, &format.UnsupportedError{Format: "gguf", File: f.name,
			What: fmt.Sprintf("tensor %q: reading ggml type %v as float32", name, typ)}
	}
	out := make([]float32, t.NumElements())
	err = f.view(t, func(raw []byte) {
		// plain types convert a chunk at a time, dropping each chunk's
		// mapped pages once done, so the tensor is not resident twice
		width := map[GGMLType]int{TypeF32: 4, TypeF16: 2, TypeBF16: 2}[typ]
		if width == 0 || f.mapped == nil || f.release == nil {
			decodeFloat32(out, raw, typ)
			return
		}
		for lo := 0; lo < len(out); lo += releaseChunk {
			hi := min(lo+releaseChunk, len(out))
			decodeFloat32(out[lo:hi], raw[lo*width:hi*width], typ)
			f.release(t.Offset+int64(lo*width), int64((hi-lo)*width))
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// releaseChunk is how many values ReadFloat32 converts between releases of
// the mapped pages it has read.
const releaseChunk = 1 << 20

// decodeFloat32 converts raw data of a readable type to float32.
func decodeFloat32(out []float32, raw []byte, typ GGMLType) {
	le := binary.LittleEndian
	switch typ {
	case TypeF32:
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
		}
	case TypeF16:
		for i := range out {
			out[i] = tensor.F16ToF32(le.Uint16(raw[2*i:]))
		}
	case TypeBF16:
		for i := range out {
			out[i] = tensor.BF16ToF32(le.Uint16(raw[2*i:]))
		}
	default:
		Dequantize(typ, out, raw)
	}
}

// Release drops the mapped pages of the named tensor from the process's
// resident memory once it has been read (see mmapfile.Region.Release);
// slices TensorData returned for it stay valid and read the file again.
// It does nothing for an unknown name or a file that is not mapped.
func (f *File) Release(name string) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	i, ok := f.index[name]
	if !ok || f.closed || f.release == nil {
		return
	}
	f.release(f.tensors[i].Offset, f.tensors[i].Size)
}

// Close releases the file. Slices returned by TensorData for a mapped file
// must not be used afterwards.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	f.mapped = nil
	if f.closer != nil {
		if err := f.closer(); err != nil {
			return fmt.Errorf("gguf: closing %s: %w", f.name, err)
		}
	}
	return nil
}
