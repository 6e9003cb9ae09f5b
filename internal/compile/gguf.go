package compile

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tensor"
)

// GGUF block types at compile time. A GGUF file's quantized weights keep
// a quantized form in the artifact (GGUFNative, the default) or are
// dequantized to float32 (GGUFFloat32):
//
//   - Q4_K keeps its super-blocks (layout q4k-p: 6-bit scales and
//     minimums per group of 32, d and dmin per 256, 4.75 bits a weight),
//     exactly, where a row is a whole number of 256 values (always, in
//     files llama.cpp writes); other rows become q4 as Q4_1 does.
//   - Q4_0 and Q4_1 become aotlm's q4 layout with groups of 32 and a
//     float32 scale (and zero point) per group. Q4_0 is exact; Q4_1
//     stores x = d*q - m as s*(q - z) with s = d and z = m/d, so the
//     only change is the float32 rounding of z (relative 6e-8 of m).
//   - Q6_K keeps its super-blocks (layout q6k-p, 6.625 bits a weight),
//     exactly, in the token embedding and the classifier (token_embd,
//     output): tables that are read a row at a time or for one token's
//     logits, which the 6-bit kernels serve. Elsewhere it becomes w8, as
//     below, whose prefill tiles are faster.
//   - Every other block type (Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q5_K,
//     Q8_K, IQ4_NL, IQ4_XS, MXFP4) is decoded exactly and requantized to
//     w8: 8-bit integers with one scale per output row. That is lossy;
//     docs/formats.md gives the measured perplexity change.
//
// Only weights that feed a linear or an embedding step, with rows a
// whole number of 32-value groups, are kept quantized; the others are
// decoded to float32 as before.
const (
	GGUFNative  = "native"
	GGUFFloat32 = "f32"
)

// GGUFWeightModes lists the values Options.GGUFWeights takes ("" means
// GGUFNative).
var GGUFWeightModes = []string{GGUFNative, GGUFFloat32}

// GGUFConversion is how one GGUF block type is stored in the artifact.
type GGUFConversion struct {
	Type   string // ggml type, such as "Q4_K"
	Scheme string // aotlm scheme, such as "q4/g32/asym", or "f32"
	Exact  bool   // no value changes beyond float32 rounding
}

// GGUFConversionOf returns how compile stores the GGUF tensor named
// tensor, of type t, in mode ("" is GGUFNative).
func GGUFConversionOf(t gguf.GGMLType, mode, tensor string) GGUFConversion {
	c := GGUFConversion{Type: t.String(), Scheme: "f32", Exact: true}
	if mode == GGUFFloat32 || t.BlockSize() <= 1 {
		return c
	}
	c.Scheme, c.Exact = "w8", false
	if k, ok := ggufKept[t]; ok && (!k.tablesOnly || ggufTable(tensor)) {
		c.Scheme, c.Exact = k.scheme, true
	}
	return c
}

// ggufQuantized returns the weight [rows, cols] stored as src in f in its
// artifact form (see GGUFConversionOf), or nil when it stays float32
// (plain float types, or a block type with no decoder).
func ggufQuantized(f *gguf.File, src string, rows, cols int) (*quant.Quantized, error) {
	typ, ok := f.TensorType(src)
	if !ok || typ.BlockSize() <= 1 || cols%32 != 0 {
		return nil, nil
	}
	raw, err := f.TensorData(src)
	if err != nil {
		return nil, err
	}
	q, err := fromBlocks(typ, raw, rows, cols, ggufTable(src))
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", src, err)
	}
	return q, nil
}

// ggufTable reports whether the GGUF tensor src is the token embedding or
// the classifier, whose Q6_K blocks stay 6-bit.
func ggufTable(src string) bool { return src == "token_embd.weight" || src == "output.weight" }

// fromBlocks converts the blocks raw of type typ, a weight [rows, cols]
// with cols a multiple of 32, to its artifact form; nil for a type with
// no decoder. table is ggufTable of the tensor.
func fromBlocks(typ gguf.GGMLType, raw []byte, rows, cols int, table bool) (*quant.Quantized, error) {
	bs, bb := int(typ.BlockSize()), int(typ.BlockBytes())
	n := rows * cols
	if bs <= 1 || cols%bs != 0 || cols%32 != 0 || len(raw) != n/bs*bb {
		return nil, fmt.Errorf("%d bytes of %v for [%d, %d] values", len(raw), typ, rows, cols)
	}
	if k, ok := ggufKept[typ]; ok && (!k.tablesOnly || table) {
		q, err := k.convert(raw, rows, cols)
		if err != nil {
			return nil, err
		}
		for i := range q.Scales {
			s, z := float64(q.Scales[i]), 0.0
			if q.Zeros != nil {
				z = float64(q.Zeros[i])
			}
			if math.IsNaN(s) || math.IsInf(s, 0) || math.IsNaN(z) || math.IsInf(z, 0) {
				return nil, fmt.Errorf("%v group %d of row %d has a non-finite scale or minimum", typ, i%(cols/32), i/(cols/32))
			}
		}
		return q, nil
	}
	v := make([]float32, n)
	if !gguf.Dequantize(typ, v, raw) {
		return nil, nil
	}
	return quant.QuantizeW8(v, rows, cols)
}

// half reads a little-endian binary16 value.
func half(b []byte) float32 { return tensor.F16ToF32(binary.LittleEndian.Uint16(b)) }
