package gguf

import (
	"errors"
	"fmt"
	"github.com/aotlm/aotlm/internal/mmapfile"
	"io"
	"math"
	"math/bits"
	"sort"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/tensor"
)

const (
	magic            = "GGUF"
	headerSize       = 24 // magic, version, tensor_count, kv_count
	defaultAlignment = 32
	maxDims          = 4
	alignmentKey     = "general.alignment"
	maxAlignment     = 1 << 20 // far above any real file (32 or 64); bounds padding

	minTensorInfoSize = 8 + 4 + 4 + 8 // empty name, n_dims, type, offset
	minKVSize         = 8 + 4 + 1     // empty key, value type, one-byte value
)

// Open opens and validates the GGUF file at path. It memory-maps the file
// where the platform supports it and otherwise reads through the open file.
func Open(path string) (*File, error) {
	reg, err := mmapfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := parse(reg, reg.Size, path)
	if err != nil {
		reg.Close()
		return nil, err
	}
	f.mapped = reg.Data
	f.closer = reg.Close
	f.release = reg.Release
	return f, nil
}

// OpenReader validates a GGUF file held by r (size bytes; name is used in
// errors). Tensor data is read from r on demand, so r must stay readable
// until the File is no longer used. Close does not close r.
func OpenReader(r io.ReaderAt, size int64, name string) (*File, error) {
	if size < 0 {
		return nil, &format.Error{Format: "gguf", File: name, Field: "header", Msg: fmt.Sprintf("negative size %d", size)}
	}
	return parse(r, size, name)
}

// parser carries the state of one header parse.
type parser struct {
	d *decoder
	f *File
}

func (p *parser) errorf(field, msg string, args ...any) error {
	return &format.Error{Format: "gguf", File: p.f.name, Field: field, Msg: fmt.Sprintf(msg, args...)}
}

// fieldError converts a decoder error into a *format.Error naming field,
// keeping I/O errors (which are not malformed input) wrapped as they are.
func (p *parser) fieldError(field string, err error) error {
	var re *readError
	if errors.As(err, &re) {
		return fmt.Errorf("gguf: %s: %s: %w", p.f.name, field, err)
	}
	return p.errorf(field, "%v", err)
}

func (p *parser) unsupported(what string, args ...any) error {
	return &format.UnsupportedError{Format: "gguf", File: p.f.name, What: fmt.Sprintf(what, args...)}
}

func parse(r io.ReaderAt, size int64, name string) (*File, error) {
	p := &parser{
		d: newDecoder(r, size),
		f: &File{name: name, size: size, r: r, alignment: defaultAlignment},
	}
	if err := p.header(); err != nil {
		return nil, err
	}
	return p.f, nil
}

func (p *parser) header() error {
	f, d := p.f, p.d
	if f.size < headerSize {
		return p.errorf("header", "file is %d bytes, shorter than the %d-byte header", f.size, headerSize)
	}
	m, err := d.next(4)
	if err != nil {
		return p.fieldError("magic", err)
	}
	if string(m) != magic {
		return p.errorf("magic", "got %q, want %q", m, magic)
	}
	if f.version, err = d.u32(); err != nil {
		return p.fieldError("version", err)
	}
	switch v := f.version; {
	case v == 2 || v == 3:
	case v&0xffff == 0 && bits.ReverseBytes32(v) <= 3:
		return p.unsupported("big-endian file (version %d byte-swapped)", bits.ReverseBytes32(v))
	default:
		return p.unsupported("version %d (want 2 or 3)", v)
	}
	nTensors, err := d.count(minTensorInfoSize)
	if err != nil {
		return p.fieldError("tensor_count", err)
	}
	nKV, err := d.count(minKVSize)
	if err != nil {
		return p.fieldError("kv_count", err)
	}
	if err := p.metadata(nKV); err != nil {
		return err
	}
	if err := p.tensorInfos(nTensors); err != nil {
		return err
	}
	return p.layout()
}

func (p *parser) metadata(n int64) error {
	f, d := p.f, p.d
	f.kvs = make([]KV, 0, n)
	f.kvIndex = make(map[string]int, n)
	for i := range n {
		key, err := d.str()
		if err != nil {
			return p.fieldError(fmt.Sprintf("kv[%d].key", i), err)
		}
		if _, dup := f.kvIndex[key]; dup {
			return p.errorf(key, "duplicate metadata key")
		}
		t, err := d.u32()
		if err != nil {
			return p.fieldError(key, err)
		}
		if ValueType(t).minSize() == 0 {
			return p.errorf(key, "unknown value type %d", t)
		}
		v, err := d.readValue(ValueType(t), 0)
		if err != nil {
			return p.fieldError(key, err)
		}
		f.kvIndex[key] = len(f.kvs)
		f.kvs = append(f.kvs, KV{Key: key, Value: v})
	}
	if i, ok := f.kvIndex[alignmentKey]; ok {
		a, ok := format.MetaInt(map[string]any{alignmentKey: widen(f.kvs[i].Value)}, alignmentKey)
		if !ok {
			return p.errorf(alignmentKey, "value %v is not an integer", f.kvs[i].Value)
		}
		if !validAlignment(a) {
			return p.errorf(alignmentKey, "alignment %d is not a power of two in [1, %d]", a, maxAlignment)
		}
		f.alignment = a
	}
	return nil
}

func (p *parser) tensorInfos(n int64) error {
	f, d := p.f, p.d
	f.tensors = make([]format.TensorInfo, 0, n)
	f.types = make([]GGMLType, 0, n)
	f.index = make(map[string]int, n)
	for i := range n {
		name, err := d.str()
		if err != nil {
			return p.fieldError(fmt.Sprintf("tensor[%d].name", i), err)
		}
		if name == "" {
			return p.errorf(fmt.Sprintf("tensor[%d].name", i), "empty tensor name")
		}
		if _, dup := f.index[name]; dup {
			return p.errorf(name, "duplicate tensor name")
		}
		nDims, err := d.u32()
		if err != nil {
			return p.fieldError(name, err)
		}
		if nDims > maxDims {
			return p.errorf(name, "n_dims %d exceeds %d", nDims, maxDims)
		}
		shape := make([]int64, nDims)
		for j := range shape {
			ne, err := d.u64()
			if err != nil {
				return p.fieldError(name, err)
			}
			if ne > math.MaxInt64 {
				return p.errorf(name, "dimension ne[%d] = %d overflows int64", j, ne)
			}
			shape[len(shape)-1-j] = int64(ne) // outermost first
		}
		t, err := d.u32()
		if err != nil {
			return p.fieldError(name, err)
		}
		typ := GGMLType(t)
		if !typ.Known() {
			return p.unsupported("tensor %q: unknown ggml type %d", name, t)
		}
		nel, err := tensor.NumElements(shape)
		if err != nil {
			return p.errorf(name, "shape %v: %v", shape, err)
		}
		if row := rowLen(shape); row%typ.BlockSize() != 0 {
			return p.errorf(name, "row of %d values is not a whole number of %v blocks of %d",
				row, typ, typ.BlockSize())
		}
		blocks := nel / typ.BlockSize()
		if blocks > math.MaxInt64/typ.BlockBytes() {
			return p.errorf(name, "byte size of shape %v of %v overflows", shape, typ)
		}
		off, err := d.u64()
		if err != nil {
			return p.fieldError(name, err)
		}
		if off > math.MaxInt64 {
			return p.errorf(name, "offset %d overflows int64", off)
		}
		f.index[name] = len(f.tensors)
		f.tensors = append(f.tensors, format.TensorInfo{
			Name:   name,
			DType:  typ.DType(),
			Shape:  shape,
			Offset: int64(off), // relative until layout
			Size:   blocks * typ.BlockBytes(),
		})
		f.types = append(f.types, typ)
	}
	return nil
}

// layout places the data section, makes tensor offsets absolute and checks
// alignment, bounds and overlaps.
func (p *parser) layout() error {
	f := p.f
	a := f.alignment
	end := p.d.off
	f.dataStart = (end + a - 1) / a * a
	for i := range f.tensors {
		t := &f.tensors[i]
		if t.Offset%a != 0 {
			return p.errorf(t.Name, "offset %d is not a multiple of the alignment %d", t.Offset, a)
		}
		if t.Offset > f.size || t.Size > f.size || f.dataStart+t.Offset > f.size-t.Size {
			return p.errorf(t.Name, "data [%d, +%d) past end of file (%d bytes, data section at %d)",
				t.Offset, t.Size, f.size, f.dataStart)
		}
		t.Offset += f.dataStart
	}
	order := make([]int, len(f.tensors))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return f.tensors[order[i]].Offset < f.tensors[order[j]].Offset })
	var prev *format.TensorInfo
	for _, i := range order {
		t := &f.tensors[i]
		if t.Size == 0 {
			continue
		}
		if prev != nil && prev.Offset+prev.Size > t.Offset {
			return p.errorf(t.Name, "data at offset %d overlaps tensor %q (offset %d, %d bytes)",
				t.Offset-f.dataStart, prev.Name, prev.Offset-f.dataStart, prev.Size)
		}
		prev = t
	}
	return nil
}

// rowLen is the innermost dimension of shape (1 for a scalar).
func rowLen(shape []int64) int64 {
	if len(shape) == 0 {
		return 1
	}
	return shape[len(shape)-1]
}

func validAlignment(a int64) bool { return a > 0 && a&(a-1) == 0 && a <= maxAlignment }
