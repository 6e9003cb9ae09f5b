package llama2c

import (
	"encoding/binary"
	"fmt"

	"github.com/aotlm/aotlm/internal/format"
)

// Magic is the u32 at offset 0 of version 1 and 2 files.
const Magic = 0x616b3432

// HeaderSize is the header length of version 1 and 2 files.
const HeaderSize = 256

// legacyHeaderSize is the header length of version 0 files (7 x int32).
const legacyHeaderSize = 28

// Limits beyond which a header value is treated as corrupt.
const (
	maxDim       = 1 << 16
	maxHidden    = 1 << 20
	maxLayers    = 1 << 10
	maxVocab     = 1 << 24
	maxSeqLen    = 1 << 24
	maxGroupSize = 1 << 20
)

const formatName = "llama2c"

// Config holds a checkpoint's hyper-parameters.
type Config struct {
	Dim       int // D, the residual width
	HiddenDim int // H, the feed-forward width
	NLayers   int // L
	NHeads    int
	NKVHeads  int
	VocabSize int // V, always positive here
	SeqLen    int // S, the maximum context
	// SharedClassifier is true when the output projection is
	// tok_embeddings (no "output.weight" stored).
	SharedClassifier bool
	// GroupSize is the quantization group of version 2 files (0 otherwise).
	GroupSize int
}

// HeadSize is Dim / NHeads.
func (c Config) HeadSize() int { return c.Dim / c.NHeads }

// KVDim is the width of the k and v projections, NKVHeads * HeadSize.
func (c Config) KVDim() int { return c.NKVHeads * c.HeadSize() }

func errorf(file, field, msg string, args ...any) *format.Error {
	return &format.Error{Format: formatName, File: file, Field: field, Msg: fmt.Sprintf(msg, args...)}
}

// validate checks the hyper-parameters; the error names the field at fault.
func (c Config) validate(file string, version int) error {
	fields := []struct {
		name     string
		v, limit int
	}{
		{"dim", c.Dim, maxDim},
		{"hidden_dim", c.HiddenDim, maxHidden},
		{"n_layers", c.NLayers, maxLayers},
		{"n_heads", c.NHeads, maxDim},
		{"n_kv_heads", c.NKVHeads, maxDim},
		{"vocab_size", c.VocabSize, maxVocab},
		{"seq_len", c.SeqLen, maxSeqLen},
	}
	for _, f := range fields {
		if f.v <= 0 || f.v > f.limit {
			return errorf(file, f.name, "%d is outside 1..%d", f.v, f.limit)
		}
	}
	switch {
	case c.Dim%c.NHeads != 0:
		return errorf(file, "n_heads", "dim %d is not a multiple of n_heads %d", c.Dim, c.NHeads)
	case c.NKVHeads > c.NHeads || c.NHeads%c.NKVHeads != 0:
		return errorf(file, "n_kv_heads", "n_heads %d is not a multiple of n_kv_heads %d", c.NHeads, c.NKVHeads)
	case c.HeadSize()%2 != 0:
		return errorf(file, "n_heads", "head size %d is odd; RoPE rotates pairs", c.HeadSize())
	}
	if version == 2 {
		if c.GroupSize <= 0 || c.GroupSize > maxGroupSize {
			return errorf(file, "group_size", "%d is outside 1..%d", c.GroupSize, maxGroupSize)
		}
		// Every quantized tensor has dim as a factor of its size.
		if c.Dim%c.GroupSize != 0 {
			return errorf(file, "group_size", "%d does not divide dim %d", c.GroupSize, c.Dim)
		}
	} else if c.GroupSize != 0 {
		return errorf(file, "group_size", "set to %d in a version %d file", c.GroupSize, version)
	}
	return nil
}

// parseHeader decodes the header at the start of b (at least
// HeaderSize bytes, or the whole file when shorter) and returns the
// configuration, version and header length.
func parseHeader(b []byte, file string) (Config, int, int, error) {
	le := binary.LittleEndian
	if len(b) < legacyHeaderSize {
		return Config{}, 0, 0, errorf(file, "header", "file is %d bytes, shorter than the %d-byte header", len(b), legacyHeaderSize)
	}
	i32 := func(off int) int { return int(int32(le.Uint32(b[off:]))) }
	params := func(off int) Config {
		return Config{Dim: i32(off), HiddenDim: i32(off + 4), NLayers: i32(off + 8), NHeads: i32(off + 12),
			NKVHeads: i32(off + 16), VocabSize: i32(off + 20), SeqLen: i32(off + 24)}
	}
	if le.Uint32(b) != Magic {
		c := params(0)
		c.SharedClassifier = c.VocabSize > 0
		if c.VocabSize < 0 {
			c.VocabSize = -c.VocabSize // int is 64-bit on every supported target
		}
		if err := c.validate(file, 0); err != nil {
			return Config{}, 0, 0, err
		}
		return c, 0, legacyHeaderSize, nil
	}
	if len(b) < HeaderSize {
		return Config{}, 0, 0, errorf(file, "header", "file is %d bytes, shorter than the %d-byte header", len(b), HeaderSize)
	}
	version := i32(4)
	if version != 1 && version != 2 {
		return Config{}, 0, 0, &format.UnsupportedError{Format: formatName, File: file,
			What: fmt.Sprintf("version %d (this reader knows 0, 1 and 2)", version)}
	}
	c := params(8)
	switch b[36] {
	case 0:
	case 1:
		c.SharedClassifier = true
	default:
		return Config{}, 0, 0, errorf(file, "shared_classifier", "flag is %d, want 0 or 1", b[36])
	}
	if version == 2 {
		c.GroupSize = i32(37)
	}
	if err := c.validate(file, version); err != nil {
		return Config{}, 0, 0, err
	}
	return c, version, HeaderSize, nil
}

// encodeHeader returns the header bytes of cfg in the given version.
func encodeHeader(cfg Config, version int) []byte {
	le := binary.LittleEndian
	vocab := int32(cfg.VocabSize)
	var b []byte
	if version == 0 {
		if !cfg.SharedClassifier {
			vocab = -vocab
		}
	} else {
		b = le.AppendUint32(b, Magic)
		b = le.AppendUint32(b, uint32(version))
	}
	for _, v := range []int32{int32(cfg.Dim), int32(cfg.HiddenDim), int32(cfg.NLayers), int32(cfg.NHeads),
		int32(cfg.NKVHeads), vocab, int32(cfg.SeqLen)} {
		b = le.AppendUint32(b, uint32(v))
	}
	if version == 0 {
		return b
	}
	flag := byte(0)
	if cfg.SharedClassifier {
		flag = 1
	}
	b = append(b, flag)
	if version == 2 {
		b = le.AppendUint32(b, uint32(cfg.GroupSize))
	}
	return append(b, make([]byte, HeaderSize-len(b))...)
}
