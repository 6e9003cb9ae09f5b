package safetensors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/aotlm/aotlm/internal/mmapfile"
	"io"
	"math"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/tensor"
)

// region is the content of one opened file.
type region struct {
	data  []byte // the whole file when memory-mapped, else nil
	r     io.ReaderAt
	size  int64
	close func() error
	// release drops mapped pages (mmapfile.Region.Release); nil when the
	// region is not mapped
	release func(off, n int64)
}

// shard is one validated file of a checkpoint.
type shard struct {
	file string
	reg  *region
	hdr  *header
}

// location finds a tensor: shard index and entry index in that shard.
type location struct{ shard, entry int }

// Checkpoint is an opened safetensors file or sharded model. It implements
// format.Checkpoint. Its methods are safe for concurrent use until Close.
type Checkpoint struct {
	shards  []*shard
	tensors []format.TensorInfo
	where   map[string]location
	meta    map[string]any
	closed  bool
}

var _ format.Checkpoint = (*Checkpoint)(nil)

// OpenReader reads and validates a single safetensors file of size bytes
// from r; name is used in error messages. The checkpoint keeps r for
// reading tensors; Close does not close it. Metadata holds only the
// header's "__metadata__" (key "safetensors.metadata").
func OpenReader(r io.ReaderAt, size int64, name string) (*Checkpoint, error) {
	s, err := newShard(&region{r: r, size: size, close: func() error { return nil }}, name)
	if err != nil {
		return nil, err
	}
	return assemble([]*shard{s}, nil)
}

// newShard validates the header of one opened region.
func newShard(reg *region, file string) (*shard, error) {
	h, err := readHeader(reg.r, reg.size, file)
	if err != nil {
		return nil, err
	}
	return &shard{file: file, reg: reg, hdr: h}, nil
}

// assemble builds a checkpoint from validated shards, refusing a tensor
// name present in two of them. config, when non-nil, becomes the metadata.
func assemble(shards []*shard, config map[string]any) (*Checkpoint, error) {
	c := &Checkpoint{shards: shards, where: map[string]location{}, meta: config}
	if c.meta == nil {
		c.meta = map[string]any{}
	}
	var stMeta map[string]any
	for si, s := range shards {
		for ei, e := range s.hdr.tensors {
			if prev, dup := c.where[e.info.Name]; dup {
				return nil, errorf(s.file, e.info.Name, "tensor also stored in %s", shards[prev.shard].file)
			}
			c.where[e.info.Name] = location{si, ei}
			c.tensors = append(c.tensors, e.info)
		}
		for k, v := range s.hdr.metadata {
			if stMeta == nil {
				stMeta = map[string]any{}
			}
			stMeta[k] = v
		}
	}
	if stMeta != nil {
		c.meta["safetensors.metadata"] = stMeta
	}
	return c, nil
}

// Format returns "safetensors".
func (c *Checkpoint) Format() string { return formatName }

// Metadata returns the parsed config.json (JSON numbers as float64) when one
// was found next to the weights, plus the files' "__metadata__" string maps
// merged under "safetensors.metadata" (a map[string]any of strings).
func (c *Checkpoint) Metadata() map[string]any { return c.meta }

// Tensors lists every tensor, shard by shard in file-name order, each shard
// in data-offset order. Offset is absolute within the tensor's own file.
func (c *Checkpoint) Tensors() []format.TensorInfo {
	return append([]format.TensorInfo(nil), c.tensors...)
}

func (c *Checkpoint) lookup(name string) (*shard, *tensorEntry, error) {
	if c.closed {
		return nil, nil, errors.New("safetensors: checkpoint is closed")
	}
	loc, ok := c.where[name]
	if !ok {
		return nil, nil, fmt.Errorf("safetensors: no tensor %q", name)
	}
	s := c.shards[loc.shard]
	return s, &s.hdr.tensors[loc.entry], nil
}

// DTypeName returns the safetensors dtype string of the named tensor ("F32",
// "BOOL", "F8_E4M3", ...), which distinguishes types TensorInfo.DType
// reports as tensor.Invalid.
func (c *Checkpoint) DTypeName(name string) (string, bool) {
	_, e, err := c.lookup(name)
	if err != nil {
		return "", false
	}
	return e.dtype, true
}

// File returns the path (or OpenReader name) of the file holding name.
func (c *Checkpoint) File(name string) (string, bool) {
	s, _, err := c.lookup(name)
	if err != nil {
		return "", false
	}
	return s.file, true
}

// Bytes returns the raw little-endian data of the named tensor. When the
// file is memory-mapped the slice aliases the read-only mapping: it must
// not be written, and is invalid after Close.
func (c *Checkpoint) Bytes(name string) ([]byte, error) {
	s, e, err := c.lookup(name)
	if err != nil {
		return nil, err
	}
	if s.reg.data != nil {
		return s.reg.data[e.info.Offset : e.info.Offset+e.info.Size : e.info.Offset+e.info.Size], nil
	}
	buf := make([]byte, e.info.Size)
	if _, err := s.reg.r.ReadAt(buf, e.info.Offset); err != nil && !(errors.Is(err, io.EOF) && e.info.Size == 0) {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: %w", s.file, name, err)
	}
	return buf, nil
}

// ReadFloat32 reads the named F32, F16, BF16 or F64 tensor as float32. Other
// dtypes return *format.UnsupportedError naming the tensor and its dtype.
// The mapped pages are released (see Release) as they are converted.
func (c *Checkpoint) ReadFloat32(name string) ([]float32, error) {
	s, e, err := c.lookup(name)
	if err != nil {
		return nil, err
	}
	if !e.readable {
		return nil, &format.UnsupportedError{Format: formatName, File: s.file,
			What: fmt.Sprintf("tensor %q: reading dtype %s as float32", name, e.dtype)}
	}
	b, err := c.Bytes(name)
	if err != nil {
		return nil, err
	}
	if s.reg.data == nil || s.reg.release == nil {
		return decode(b, e.info.DType), nil
	}
	// convert a chunk at a time, dropping each chunk's mapped pages once
	// done, so the tensor is not resident twice
	width := e.info.DType.BlockBytes()
	out := make([]float32, len(b)/width)
	for lo := 0; lo < len(out); lo += releaseChunk {
		hi := min(lo+releaseChunk, len(out))
		decodeInto(out[lo:hi], b[lo*width:hi*width], e.info.DType)
		s.reg.release(e.info.Offset+int64(lo*width), int64((hi-lo)*width))
	}
	return out, nil
}

// releaseChunk is how many values ReadFloat32 converts between releases of
// the mapped pages it has read.
const releaseChunk = 1 << 20

// decode converts little-endian values of a readable dtype to float32.
func decode(b []byte, d tensor.DType) []float32 {
	out := make([]float32, len(b)/d.BlockBytes())
	decodeInto(out, b, d)
	return out
}

// decodeInto converts the values of b (len(out) of them) into out.
func decodeInto(out []float32, b []byte, d tensor.DType) {
	le := binary.LittleEndian
	switch d {
	case tensor.F32:
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
	case tensor.F16:
		for i := range out {
			out[i] = tensor.F16ToF32(le.Uint16(b[2*i:]))
		}
	case tensor.BF16:
		for i := range out {
			out[i] = tensor.BF16ToF32(le.Uint16(b[2*i:]))
		}
	case tensor.F64:
		for i := range out {
			out[i] = float32(math.Float64frombits(le.Uint64(b[8*i:])))
		}
	default:
		panic("safetensors: decode of unreadable dtype " + d.String())
	}
}

// Release drops the mapped pages of the named tensor from the process's
// resident memory once it has been read (see mmapfile.Region.Release);
// slices Bytes returned for it stay valid and read the file again. It does
// nothing for an unknown name or a file that is not mapped.
func (c *Checkpoint) Release(name string) {
	s, e, err := c.lookup(name)
	if err != nil || s.reg.data == nil || s.reg.release == nil {
		return
	}
	s.reg.release(e.info.Offset, e.info.Size)
}

// Close releases every file of the checkpoint.
func (c *Checkpoint) Close() error {
	var errs []error
	c.closed = true
	for _, s := range c.shards {
		if s.reg.close != nil {
			if err := s.reg.close(); err != nil {
				errs = append(errs, fmt.Errorf("safetensors: closing %s: %w", s.file, err))
			}
			s.reg.close = nil
			s.reg.data = nil
		}
	}
	return errors.Join(errs...)
}

// openRegion opens path read-only, memory-mapped where possible.
func openRegion(path string) (*region, error) {
	m, err := mmapfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	return &region{data: m.Data, r: m, size: m.Size, close: m.Close, release: m.Release}, nil
}
