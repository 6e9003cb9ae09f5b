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
	switch t {
	case gguf.TypeQ4_0:
		c.Scheme = "q4/g32/sym"
	case gguf.TypeQ4_K:
		c.Scheme = "q4k"
	case gguf.TypeQ4_1:
		c.Scheme = "q4/g32/asym"
	case gguf.TypeQ6_K:
		c.Scheme, c.Exact = "w8", false
		if ggufTable(tensor) {
			c.Scheme, c.Exact = "q6k", true
		}
	default:
		c.Scheme, c.Exact = "w8", false
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
	var q *quant.Quantized
	switch typ {
	case gguf.TypeQ4_0:
		q = q4FromQ4_0(raw, rows, cols)
	case gguf.TypeQ4_1:
		q = q4FromQ4_1(raw, rows, cols)
	case gguf.TypeQ4_K:
		q = q4FromQ4_K(raw, rows, cols)
	case gguf.TypeQ6_K:
		if table {
			return q6kFromQ6_K(raw, rows, cols)
		}
	}
	if q != nil {
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

// newQ4 allocates a q4 weight with groups of 32.
func newQ4(rows, cols int, sym bool) *quant.Quantized {
	q := &quant.Quantized{Scheme: quant.Scheme{Kind: quant.KindQ4, Block: 32, Sym: sym},
		Rows: rows, Cols: cols, Q: make([]int8, rows*cols), Scales: make([]float32, rows*cols/32)}
	if !sym {
		q.Zeros = make([]float32, rows*cols/32)
	}
	return q
}

// setAffine sets group g of q, whose values are scale*u - min for the
// codes u (0..15) already in q.Q, as s*(u - z). A group with scale 0 is
// the constant -min: its codes become 0 with s = min and z = 1.
func setAffine(q *quant.Quantized, g int, scale, min float32) {
	if scale == 0 {
		clear(q.Q[g*32 : (g+1)*32])
		q.Scales[g], q.Zeros[g] = min, 1
		return
	}
	q.Scales[g], q.Zeros[g] = scale, min/scale
}

func half(b []byte) float32 { return tensor.F16ToF32(binary.LittleEndian.Uint16(b)) }

// q4FromQ4_0 re-lays Q4_0 blocks (d f16, 16 bytes of codes: value j in
// the low nibble of byte j, value j+16 in the high one; x = d*(u - 8)).
func q4FromQ4_0(raw []byte, rows, cols int) *quant.Quantized {
	q := newQ4(rows, cols, true)
	for g := range rows * cols / 32 {
		blk := raw[g*18 : (g+1)*18]
		q.Scales[g] = half(blk)
		out := q.Q[g*32 : (g+1)*32]
		for j, b := range blk[2:18] {
			out[j], out[j+16] = int8(b&15)-8, int8(b>>4)-8
		}
	}
	return q
}

// q4FromQ4_1 re-lays Q4_1 blocks (d f16, m f16, 16 bytes of codes as
// Q4_0; x = d*u + m).
func q4FromQ4_1(raw []byte, rows, cols int) *quant.Quantized {
	q := newQ4(rows, cols, false)
	for g := range rows * cols / 32 {
		blk := raw[g*20 : (g+1)*20]
		out := q.Q[g*32 : (g+1)*32]
		for j, b := range blk[4:20] {
			out[j], out[j+16] = int8(b&15), int8(b>>4)
		}
		setAffine(q, g, half(blk), -half(blk[2:]))
	}
	return q
}

// q4FromQ4_K re-lays Q4_K super-blocks (d f16, dmin f16, 12 bytes of
// 6-bit scales and mins, 128 bytes of codes): 8 groups of 32 with
// x = d*sc*u - dmin*m, groups 2i and 2i+1 in the low and high nibbles of
// bytes 32i..32i+31.
//
// The super-blocks' own parts are kept too (Quantized.K4): compile packs
// them as they are (layout q4k-p, 4.75 bits a weight) where a row is a
// whole number of super-blocks.
func q4FromQ4_K(raw []byte, rows, cols int) *quant.Quantized {
	q := quant.NewQ4K(rows, cols)
	k4 := q.K4
	for sb := range rows * cols / 256 {
		blk := raw[sb*144 : (sb+1)*144]
		d, dmin := half(blk), half(blk[2:])
		k4.D[sb], k4.DMin[sb] = d, dmin
		scales, codes := blk[4:16], blk[16:144]
		for i := range 4 {
			lo, hi := 8*sb+2*i, 8*sb+2*i+1
			for l, b := range codes[32*i : 32*i+32] {
				q.Q[lo*32+l], q.Q[hi*32+l] = int8(b&15), int8(b>>4)
			}
			for _, g := range []int{lo, hi} {
				k4.Sc[g], k4.M[g] = gguf.ScaleMinK4(g-8*sb, scales)
				q.RestateQ4K(g)
			}
		}
	}
	return q
}

// q6kFromQ6_K re-lays Q6_K super-blocks (ql [128], qh [64], scales
// [16]int8, d f16; x = d*scale*q with the 6-bit q less 32) as a q6k
// weight, exactly. In each half of 128 values, byte l of ql and qh hold
// values l, l+32, l+64 and l+96: ql[l] the low nibbles of l and l+64,
// ql[l+32] those of l+32 and l+96, qh[l] the high 2 bits of all four.
func q6kFromQ6_K(raw []byte, rows, cols int) (*quant.Quantized, error) {
	ns := rows * cols / quant.Q6KSuper
	q := &quant.Quantized{Scheme: quant.Scheme{Kind: quant.KindQ6K}, Rows: rows, Cols: cols,
		Q: make([]int8, rows*cols), Sub: make([]int8, rows*cols/quant.Q6KGroup), Scales: make([]float32, ns)}
	for sb := range ns {
		blk := raw[sb*210 : (sb+1)*210]
		d := half(blk[208:])
		if math.IsNaN(float64(d)) || math.IsInf(float64(d), 0) {
			return nil, fmt.Errorf("Q6_K super-block %d of row %d has a non-finite scale", sb%(cols/quant.Q6KSuper), sb/(cols/quant.Q6KSuper))
		}
		q.Scales[sb] = d
		for i, b := range blk[192:208] {
			q.Sub[sb*16+i] = int8(b)
		}
		out := q.Q[sb*quant.Q6KSuper : (sb+1)*quant.Q6KSuper]
		for h := range 2 {
			ql, qh, y := blk[64*h:64*h+64], blk[128+32*h:128+32*h+32], out[128*h:128*h+128]
			for l := range 32 {
				y[l] = int8(ql[l]&15|(qh[l]&3)<<4) - 32
				y[l+32] = int8(ql[l+32]&15|(qh[l]>>2&3)<<4) - 32
				y[l+64] = int8(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				y[l+96] = int8(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			}
		}
	}
	return q, nil
}
