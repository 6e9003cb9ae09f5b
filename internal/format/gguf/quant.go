package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/tensor"
)

// QK is the number of values in a Q8_0 or Q4_0 block.
const QK = 32

// Block sizes in bytes: an f16 scale, then the codes.
const (
	q8BlockBytes = 2 + QK
	q4BlockBytes = 2 + QK/2
)

// QuantizeQ8_0 quantizes x to Q8_0 blocks with ggml's reference rounding:
// per block of 32, d = amax/127, q[i] = round(x[i]/d) (half away from zero),
// d stored as f16. len(x) must be a multiple of 32; anything else is a caller
// bug and panics.
func QuantizeQ8_0(x []float32) []byte {
	checkBlocks(len(x))
	out := make([]byte, len(x)/QK*q8BlockBytes)
	for b := 0; b < len(x)/QK; b++ {
		xs := x[b*QK : (b+1)*QK]
		blk := out[b*q8BlockBytes : (b+1)*q8BlockBytes]
		var amax float32
		for _, v := range xs {
			amax = max(amax, abs32(v))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(blk, tensor.F32ToF16(d))
		for i, v := range xs {
			blk[2+i] = byte(int8(math.Round(float64(v * id))))
		}
	}
	return out
}

// QuantizeQ4_0 quantizes x to Q4_0 blocks with ggml's reference rounding:
// per block of 32, m is the value of largest magnitude, d = m/-8, and
// q[i] = min(15, trunc(x[i]/d + 8.5)); element j goes to the low nibble of
// byte j, element j+16 to its high nibble; d stored as f16. len(x) must be a
// multiple of 32; anything else is a caller bug and panics.
func QuantizeQ4_0(x []float32) []byte {
	checkBlocks(len(x))
	out := make([]byte, len(x)/QK*q4BlockBytes)
	for b := 0; b < len(x)/QK; b++ {
		xs := x[b*QK : (b+1)*QK]
		blk := out[b*q4BlockBytes : (b+1)*q4BlockBytes]
		var amax, m float32
		for _, v := range xs {
			if a := abs32(v); a > amax {
				amax, m = a, v
			}
		}
		d := m / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(blk, tensor.F32ToF16(d))
		for j := range QK / 2 {
			// float32(...) rounds the product before the add (no fused
			// multiply-add), as ggml's reference computes it.
			lo := min(15, int8(float32(xs[j]*id)+8.5))
			hi := min(15, int8(float32(xs[j+QK/2]*id)+8.5))
			blk[2+j] = byte(lo) | byte(hi)<<4
		}
	}
	return out
}

// DequantizeQ8_0 decodes Q8_0 blocks from src into dst; src must hold
// len(dst)/32 blocks of 34 bytes:
//
//	for each block b, i in 0..31: dst[32b+i] = f16(d_b) * int8(q_b[i])
func DequantizeQ8_0(dst []float32, src []byte) {
	checkBlocks(len(dst))
	for b := 0; b < len(dst)/QK; b++ {
		blk := src[b*q8BlockBytes : (b+1)*q8BlockBytes]
		d := tensor.F16ToF32(binary.LittleEndian.Uint16(blk))
		out := dst[b*QK : (b+1)*QK]
		for i := range out {
			out[i] = d * float32(int8(blk[2+i]))
		}
	}
}

// DequantizeQ4_0 decodes Q4_0 blocks from src into dst; src must hold
// len(dst)/32 blocks of 18 bytes:
//
//	for each block b, j in 0..15:
//	    dst[32b+j]    = f16(d_b) * (qs_b[j]&15 - 8)
//	    dst[32b+j+16] = f16(d_b) * (qs_b[j]>>4 - 8)
func DequantizeQ4_0(dst []float32, src []byte) {
	checkBlocks(len(dst))
	for b := 0; b < len(dst)/QK; b++ {
		blk := src[b*q4BlockBytes : (b+1)*q4BlockBytes]
		d := tensor.F16ToF32(binary.LittleEndian.Uint16(blk))
		out := dst[b*QK : (b+1)*QK]
		for j := range QK / 2 {
			q := blk[2+j]
			out[j] = d * float32(int(q&15)-8)
			out[j+QK/2] = d * float32(int(q>>4)-8)
		}
	}
}

func checkBlocks(n int) {
	if n%QK != 0 {
		panic(fmt.Sprintf("gguf: %d values is not a whole number of %d-value blocks", n, QK))
	}
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }
