package format

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/tensor"
)

// TensorInfo describes one stored tensor.
type TensorInfo struct {
	Name  string
	DType tensor.DType
	// Shape is outermost first (PyTorch order): a linear weight is [out, in].
	Shape []int64
	// Offset is the byte offset of the data in its file; Size its byte length.
	Offset int64
	Size   int64
}

// NumElements returns the number of values in the tensor.
func (t TensorInfo) NumElements() int64 {
	n, _ := tensor.NumElements(t.Shape)
	return n
}

// Checkpoint is an opened weight file (or set of shards). Implementations
// validate their whole header at open time, so Tensors and Metadata never
// describe data outside the file.
type Checkpoint interface {
	// Format names the file format: "gguf", "safetensors", "llama2c".
	Format() string
	// Metadata holds the format's key/value header: GGUF's metadata keys,
	// the parsed config.json of a safetensors model, or the llama2.c header
	// fields. Values are string, bool, int64, uint64, float64, []any (JSON
	// arrays), a typed slice (GGUF arrays: []uint8 ... []float64, []bool,
	// []string; List reads either kind), or map[string]any (JSON objects).
	Metadata() map[string]any
	// Tensors lists every tensor in file order.
	Tensors() []TensorInfo
	// ReadFloat32 reads the named tensor, converting and dequantizing to float32.
	ReadFloat32(name string) ([]float32, error)
	// Close releases the file.
	Close() error
}

// Releaser is a Checkpoint that can drop a tensor's memory-mapped pages
// from the process's resident memory once the tensor has been read, so a
// reader that goes through a model tensor by tensor stays small.
type Releaser interface {
	Release(name string)
}

// Release calls c's Release for name when c has one.
func Release(c Checkpoint, name string) {
	if r, ok := c.(Releaser); ok {
		r.Release(name)
	}
}

// Error is a malformed-input error: it names the file and the field at fault.
type Error struct {
	Format string // "gguf", "safetensors", "llama2c"
	File   string // path of the file
	Field  string // the header field or tensor name at fault
	Msg    string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %s: %s", e.Format, e.File, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s: %s", e.Format, e.File, e.Field, e.Msg)
}

// UnsupportedError reports well-formed input that aotlm does not handle (an
// unknown dtype, a newer format version).
type UnsupportedError struct {
	Format string
	File   string
	What   string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("%s: %s: unsupported: %s", e.Format, e.File, e.What)
}

// Find returns the TensorInfo named name.
func Find(c Checkpoint, name string) (TensorInfo, bool) {
	for _, t := range c.Tensors() {
		if t.Name == name {
			return t, true
		}
	}
	return TensorInfo{}, false
}
