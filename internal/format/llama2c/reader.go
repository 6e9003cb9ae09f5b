package llama2c

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

// Checkpoint is an opened llama2.c file; it implements format.Checkpoint.
// Its methods are safe for concurrent use until Close.
type Checkpoint struct {
	r       io.ReaderAt
	closer  io.Closer
	file    string
	cfg     Config
	version int
	slots   []slot
	tensors []format.TensorInfo
	index   map[string]int
	meta    map[string]any
}

var _ format.Checkpoint = (*Checkpoint)(nil)

// Open opens and validates the llama2.c checkpoint at path.
func Open(path string) (*Checkpoint, error) {
	reg, err := mmapfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("llama2c: %w", err)
	}
	c, err := OpenReader(reg, reg.Size, path)
	if err != nil {
		reg.Close()
		return nil, err
	}
	c.closer = reg
	return c, nil
}

// OpenReader validates a checkpoint of size bytes read from r; name is used
// in errors. Close does not close r.
func OpenReader(r io.ReaderAt, size int64, name string) (*Checkpoint, error) {
	hb := make([]byte, min(size, HeaderSize))
	if _, err := r.ReadAt(hb, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("llama2c: %s: reading header: %w", name, err)
	}
	cfg, version, off, err := parseHeader(hb, name)
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{r: r, file: name, cfg: cfg, version: version, index: map[string]int{}}
	c.slots = layout(cfg, version)
	pos := int64(off)
	for i, s := range c.slots {
		if s.quant && s.numel()%int64(cfg.GroupSize) != 0 {
			return nil, errorf(name, "group_size", "%d does not divide the %d values of %s", cfg.GroupSize, s.numel(), s.name)
		}
		n := s.bytes(cfg.GroupSize)
		if pos+n > size {
			return nil, errorf(name, s.name, "needs bytes %d..%d but the file has %d (truncated)", pos, pos+n, size)
		}
		dt := tensor.F32
		if s.quant {
			dt = tensor.I8
		}
		c.tensors = append(c.tensors, format.TensorInfo{Name: s.name, DType: dt,
			Shape: append([]int64(nil), s.shape...), Offset: pos, Size: n})
		c.index[s.name] = i
		pos += n
	}
	if pos != size {
		return nil, errorf(name, "file size", "%d bytes after the last tensor; the header implies a %d-byte file", size-pos, pos)
	}
	c.meta = map[string]any{
		"dim": int64(cfg.Dim), "hidden_dim": int64(cfg.HiddenDim), "n_layers": int64(cfg.NLayers),
		"n_heads": int64(cfg.NHeads), "n_kv_heads": int64(cfg.NKVHeads), "vocab_size": int64(cfg.VocabSize),
		"seq_len": int64(cfg.SeqLen), "shared_classifier": cfg.SharedClassifier, "version": int64(version),
	}
	if version == 2 {
		c.meta["group_size"] = int64(cfg.GroupSize)
	}
	return c, nil
}

// Format returns "llama2c".
func (c *Checkpoint) Format() string { return formatName }

// Config returns the header's hyper-parameters.
func (c *Checkpoint) Config() Config { return c.cfg }

// Version returns the file version: 0 (legacy), 1 (float32) or 2 (int8).
func (c *Checkpoint) Version() int { return c.version }

// Metadata returns the header fields as int64 values under "dim",
// "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
// "seq_len", "version" and (version 2) "group_size", and the bool
// "shared_classifier".
func (c *Checkpoint) Metadata() map[string]any { return c.meta }

// Tensors lists every tensor in file order. Version 2 matrices report
// DType I8; their Size covers the int8 values and the float32 scales that
// follow them.
func (c *Checkpoint) Tensors() []format.TensorInfo {
	return append([]format.TensorInfo(nil), c.tensors...)
}

func (c *Checkpoint) read(name string) (slot, format.TensorInfo, []byte, error) {
	i, ok := c.index[name]
	if !ok {
		return slot{}, format.TensorInfo{}, nil, fmt.Errorf("llama2c: no tensor %q", name)
	}
	ti := c.tensors[i]
	buf := make([]byte, ti.Size)
	if _, err := c.r.ReadAt(buf, ti.Offset); err != nil && !(errors.Is(err, io.EOF) && ti.Size == 0) {
		return slot{}, ti, nil, fmt.Errorf("llama2c: %s: tensor %q: %w", c.file, name, err)
	}
	return c.slots[i], ti, buf, nil
}

// ReadFloat32 reads the named tensor as float32, dequantizing version 2
// matrices (value i = q[i] * scale[i/group_size]).
func (c *Checkpoint) ReadFloat32(name string) ([]float32, error) {
	s, _, buf, err := c.read(name)
	if err != nil {
		return nil, err
	}
	if !s.quant {
		out := make([]float32, len(buf)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		}
		return out, nil
	}
	q, scales := splitQuant(buf, s.numel(), c.cfg.GroupSize)
	out := make([]float32, len(q))
	for i, v := range q {
		out[i] = float32(v) * scales[i/c.cfg.GroupSize]
	}
	return out, nil
}

// Quantized returns the int8 values and per-group scales of a version 2
// matrix, without dequantizing.
func (c *Checkpoint) Quantized(name string) (q []int8, scales []float32, err error) {
	s, _, buf, err := c.read(name)
	if err != nil {
		return nil, nil, err
	}
	if !s.quant {
		return nil, nil, fmt.Errorf("llama2c: %s: tensor %q is not quantized", c.file, name)
	}
	q, scales = splitQuant(buf, s.numel(), c.cfg.GroupSize)
	return q, scales, nil
}

// splitQuant decodes n int8 values and n/g float32 scales.
func splitQuant(buf []byte, n int64, g int) ([]int8, []float32) {
	q := make([]int8, n)
	for i := range q {
		q[i] = int8(buf[i])
	}
	scales := make([]float32, n/int64(g))
	for i := range scales {
		scales[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[n+4*int64(i):]))
	}
	return q, scales
}

// Close releases the file opened by Open.
func (c *Checkpoint) Close() error {
	if c.closer == nil {
		return nil
	}
	err := c.closer.Close()
	c.closer = nil
	if err != nil {
		return fmt.Errorf("llama2c: closing %s: %w", c.file, err)
	}
	return nil
}
