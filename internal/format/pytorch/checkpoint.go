package pytorch

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/tensor"
)

// Format returns "pytorch".
func (c *Checkpoint) Format() string { return formatName }

// Metadata returns the scalar values of the pickled dict (an epoch number,
// a string), keyed by their dotted names; a plain state dict has none.
func (c *Checkpoint) Metadata() map[string]any { return c.meta }

// Tensors lists every tensor in pickle order. Offset and Size are the byte
// range of the tensor's elements in the file (meaningful as one range only
// when the tensor is contiguous).
func (c *Checkpoint) Tensors() []format.TensorInfo { return c.infos }

// Bytes returns the raw little-endian bytes of a contiguous tensor.
func (c *Checkpoint) Bytes(name string) ([]byte, error) {
	e, ok := c.entries[name]
	if !ok {
		return nil, fmt.Errorf("pytorch: %s: no tensor %q", c.file, name)
	}
	if !e.contiguous {
		return nil, &format.UnsupportedError{Format: formatName, File: c.file,
			What: fmt.Sprintf("tensor %q: %v %v for size %v", name, errNotContiguous, e.stride, e.info.Shape)}
	}
	if c.r == nil {
		return nil, fmt.Errorf("pytorch: %s: checkpoint is closed", c.file)
	}
	b := make([]byte, e.info.Size)
	if _, err := c.r.ReadAt(b, e.info.Offset); err != nil {
		return nil, fmt.Errorf("pytorch: %s: reading tensor %q: %w", c.file, name, err)
	}
	return b, nil
}

// ReadFloat32 reads a contiguous tensor, converting any stored element type
// to float32 (integers exactly up to 2^24).
func (c *Checkpoint) ReadFloat32(name string) ([]float32, error) {
	b, err := c.Bytes(name)
	if err != nil {
		return nil, err
	}
	return decode(b, c.entries[name].info.DType), nil
}

// Close releases the file opened by Open.
func (c *Checkpoint) Close() error {
	c.r = nil
	if c.closer == nil {
		return nil
	}
	err := c.closer.Close()
	c.closer = nil
	if err != nil {
		return fmt.Errorf("pytorch: closing %s: %w", c.file, err)
	}
	return nil
}

// decode converts little-endian values of d to float32.
func decode(b []byte, d tensor.DType) []float32 {
	le := binary.LittleEndian
	n := len(b) / d.BlockBytes()
	out := make([]float32, n)
	for i := range out {
		switch d {
		case tensor.F32:
			out[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		case tensor.F16:
			out[i] = tensor.F16ToF32(le.Uint16(b[2*i:]))
		case tensor.BF16:
			out[i] = tensor.BF16ToF32(le.Uint16(b[2*i:]))
		case tensor.F64:
			out[i] = float32(math.Float64frombits(le.Uint64(b[8*i:])))
		case tensor.I64:
			out[i] = float32(int64(le.Uint64(b[8*i:])))
		case tensor.I32:
			out[i] = float32(int32(le.Uint32(b[4*i:])))
		case tensor.I16:
			out[i] = float32(int16(le.Uint16(b[2*i:])))
		case tensor.I8:
			out[i] = float32(int8(b[i]))
		case tensor.U8:
			out[i] = float32(b[i])
		default:
			panic("pytorch: decode of unlisted dtype " + d.String())
		}
	}
	return out
}
