package gguf

import (
	"encoding/binary"
	"math"

	"github.com/aotlm/aotlm/internal/tensor"
)

// Dequantizers of the other block types found in GGUF files on the Hub.
// The block layouts are ggml's (ggml-common.h); each function decodes
// len(dst)/BlockSize blocks of src, which must hold that many blocks.
// Products are rounded to float32 before an add (float32(...)), as ggml's
// reference C code computes them without fused multiply-adds.

// QKK is the number of values in a k-quant super-block.
const QKK = 256

var le = binary.LittleEndian

func f16(b []byte) float32 { return tensor.F16ToF32(le.Uint16(b)) }

// dequantizers maps a ggml type to its float32 decoder.
var dequantizers = map[GGMLType]func(dst []float32, src []byte){
	TypeQ8_0:   DequantizeQ8_0,
	TypeQ4_0:   DequantizeQ4_0,
	TypeQ4_1:   DequantizeQ4_1,
	TypeQ5_0:   DequantizeQ5_0,
	TypeQ5_1:   DequantizeQ5_1,
	TypeQ2_K:   DequantizeQ2_K,
	TypeQ3_K:   DequantizeQ3_K,
	TypeQ4_K:   DequantizeQ4_K,
	TypeQ5_K:   DequantizeQ5_K,
	TypeQ6_K:   DequantizeQ6_K,
	TypeQ8_K:   DequantizeQ8_K,
	TypeIQ4_NL: DequantizeIQ4_NL,
	TypeIQ4_XS: DequantizeIQ4_XS,
	TypeMXFP4:  DequantizeMXFP4,
}

// Dequantize decodes len(dst) values of type t from src into dst and
// reports whether t has a decoder. src must hold the whole blocks.
func Dequantize(t GGMLType, dst []float32, src []byte) bool {
	fn, ok := dequantizers[t]
	if ok {
		fn(dst, src)
	}
	return ok
}

// blocks iterates over the blocks of a type: fn gets block b's bytes and
// its values' slot in dst.
func blocks(dst []float32, src []byte, t GGMLType, fn func(out []float32, blk []byte)) {
	bs, bb := int(t.BlockSize()), int(t.BlockBytes())
	for b := 0; b < len(dst)/bs; b++ {
		fn(dst[b*bs:(b+1)*bs], src[b*bb:(b+1)*bb])
	}
}

// DequantizeQ4_1 decodes Q4_1 (d f16, m f16, qs [16]byte):
// x[j] = d*(qs[j]&15) + m, x[j+16] = d*(qs[j]>>4) + m.
func DequantizeQ4_1(dst []float32, src []byte) {
	blocks(dst, src, TypeQ4_1, func(out []float32, blk []byte) {
		d, m := f16(blk), f16(blk[2:])
		qs := blk[4:]
		for j := range 16 {
			out[j] = float32(float32(qs[j]&15)*d) + m
			out[j+16] = float32(float32(qs[j]>>4)*d) + m
		}
	})
}

// DequantizeQ5_0 decodes Q5_0 (d f16, qh u32, qs [16]byte): the fifth bit
// of value j is bit j of qh, of value j+16 bit j+16;
// x = d*(q - 16).
func DequantizeQ5_0(dst []float32, src []byte) {
	blocks(dst, src, TypeQ5_0, func(out []float32, blk []byte) {
		d := f16(blk)
		qh := le.Uint32(blk[2:])
		qs := blk[6:]
		for j := range 16 {
			x0 := int32(qs[j]&15|byte(qh>>j<<4)&0x10) - 16
			x1 := int32(qs[j]>>4|byte(qh>>(j+12))&0x10) - 16
			out[j] = float32(x0) * d
			out[j+16] = float32(x1) * d
		}
	})
}

// DequantizeQ5_1 decodes Q5_1 (d f16, m f16, qh u32, qs [16]byte):
// x = d*q + m with q as in Q5_0 but unsigned.
func DequantizeQ5_1(dst []float32, src []byte) {
	blocks(dst, src, TypeQ5_1, func(out []float32, blk []byte) {
		d, m := f16(blk), f16(blk[2:])
		qh := le.Uint32(blk[4:])
		qs := blk[8:]
		for j := range 16 {
			x0 := qs[j]&15 | byte(qh>>j<<4)&0x10
			x1 := qs[j]>>4 | byte(qh>>(j+12))&0x10
			out[j] = float32(float32(x0)*d) + m
			out[j+16] = float32(float32(x1)*d) + m
		}
	})
}

// DequantizeQ2_K decodes Q2_K (scales [16]byte, qs [64]byte, d f16, dmin
// f16): 16 groups of 16 values; group g has scale d*(scales[g]&15) and
// minimum dmin*(scales[g]>>4); its 2-bit codes are the bit pair
// 2*((g/2)%4) of qs[32*(g/8) + 16*(g%2) + l].
func DequantizeQ2_K(dst []float32, src []byte) {
	blocks(dst, src, TypeQ2_K, func(out []float32, blk []byte) {
		scales, q := blk[:16], blk[16:80]
		d, dmin := f16(blk[80:]), f16(blk[82:])
		is, y := 0, 0
		for n := 0; n < QKK; n += 128 {
			for shift := 0; shift < 8; shift += 2 {
				for half := 0; half < 2; half++ {
					sc := scales[is]
					is++
					dl, ml := d*float32(sc&15), dmin*float32(sc>>4)
					for l := range 16 {
						out[y] = float32(dl*float32((q[l+16*half]>>shift)&3)) - ml
						y++
					}
				}
			}
			q = q[32:]
		}
	})
}

// DequantizeQ3_K decodes Q3_K (hmask [32]byte, qs [64]byte, scales [12]byte,
// d f16): 16 groups of 16 values with 6-bit signed scales (stored offset by
// 32, low 4 bits in the first 8 bytes, high 2 bits in the last 4) and 3-bit
// codes: 2 low bits as in Q2_K, the third from hmask, subtracting 4 when it
// is clear.
func DequantizeQ3_K(dst []float32, src []byte) {
	blocks(dst, src, TypeQ3_K, func(out []float32, blk []byte) {
		hm, q, sraw := blk[:32], blk[32:96], blk[96:108]
		dAll := f16(blk[108:])
		var scales [16]int8
		for i := range 16 {
			var low, high byte
			if i < 8 {
				low = sraw[i] & 15
			} else {
				low = sraw[i-8] >> 4
			}
			high = (sraw[8+i%4] >> (2 * (i / 4))) & 3
			scales[i] = int8(low|high<<4) - 32
		}
		is, y := 0, 0
		m := byte(1)
		for n := 0; n < QKK; n += 128 {
			for shift := 0; shift < 8; shift += 2 {
				for half := 0; half < 2; half++ {
					dl := dAll * float32(scales[is])
					is++
					for l := range 16 {
						v := int8((q[l+16*half] >> shift) & 3)
						if hm[l+16*half]&m == 0 {
							v -= 4
						}
						out[y] = dl * float32(v)
						y++
					}
				}
				m <<= 1
			}
			q = q[32:]
		}
	})
}

// ScaleMinK4 unpacks the j-th 6-bit scale and minimum of a Q4_K or Q5_K
// block's 12 scale bytes.
func ScaleMinK4(j int, q []byte) (sc, m byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&15 | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// DequantizeQ4_K decodes Q4_K (d f16, dmin f16, scales [12]byte, qs
// [128]byte): 8 groups of 32 values, x = d*sc*q - dmin*m with 6-bit sc, m;
// groups 2i and 2i+1 take the low and high nibbles of qs[32i:32i+32].
func DequantizeQ4_K(dst []float32, src []byte) {
	blocks(dst, src, TypeQ4_K, func(out []float32, blk []byte) {
		d, dmin := f16(blk), f16(blk[2:])
		scales, q := blk[4:16], blk[16:144]
		y := 0
		for g := 0; g < 8; g += 2 {
			sc, m := ScaleMinK4(g, scales)
			// float32(...): the products rounded, never fused (arm64)
			d1, m1 := float32(d*float32(sc)), float32(dmin*float32(m))
			sc, m = ScaleMinK4(g+1, scales)
			d2, m2 := float32(d*float32(sc)), float32(dmin*float32(m))
			for l := range 32 {
				out[y+l] = float32(d1*float32(q[l]&15)) - m1
				out[y+32+l] = float32(d2*float32(q[l]>>4)) - m2
			}
			q, y = q[32:], y+64
		}
	})
}

// DequantizeQ5_K decodes Q5_K (d f16, dmin f16, scales [12]byte, qh
// [32]byte, qs [128]byte): Q4_K with a fifth bit, bit g of qh[l] for value
// l of group g.
func DequantizeQ5_K(dst []float32, src []byte) {
	blocks(dst, src, TypeQ5_K, func(out []float32, blk []byte) {
		d, dmin := f16(blk), f16(blk[2:])
		scales, qh, ql := blk[4:16], blk[16:48], blk[48:176]
		y := 0
		u1, u2 := byte(1), byte(2)
		for g := 0; g < 8; g += 2 {
			sc, m := ScaleMinK4(g, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = ScaleMinK4(g+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			for l := range 32 {
				v1, v2 := ql[l]&15, ql[l]>>4
				if qh[l]&u1 != 0 {
					v1 += 16
				}
				if qh[l]&u2 != 0 {
					v2 += 16
				}
				out[y+l] = float32(d1*float32(v1)) - m1
				out[y+32+l] = float32(d2*float32(v2)) - m2
			}
			ql, y = ql[32:], y+64
			u1, u2 = u1<<2, u2<<2
		}
	})
}

// DequantizeQ6_K decodes Q6_K (ql [128]byte, qh [64]byte, scales [16]int8,
// d f16): 16 groups of 16 values, x = d*scale*(q - 32) with 6-bit q split
// into a nibble of ql and a bit pair of qh.
func DequantizeQ6_K(dst []float32, src []byte) {
	blocks(dst, src, TypeQ6_K, func(out []float32, blk []byte) {
		ql, qh, sc := blk[:128], blk[128:192], blk[192:208]
		d := f16(blk[208:])
		y := out
		for n := 0; n < QKK; n += 128 {
			for l := range 32 {
				is := l / 16
				q1 := int8(ql[l]&15|(qh[l]>>0&3)<<4) - 32
				q2 := int8(ql[l+32]&15|(qh[l]>>2&3)<<4) - 32
				q3 := int8(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int8(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				y[l] = d * float32(int8(sc[is])) * float32(q1)
				y[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				y[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				y[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
			y, ql, qh, sc = y[128:], ql[64:], qh[32:], sc[8:]
		}
	})
}

// DequantizeQ8_K decodes Q8_K (d f32, qs [256]int8, bsums [16]int16):
// x = d*q.
func DequantizeQ8_K(dst []float32, src []byte) {
	blocks(dst, src, TypeQ8_K, func(out []float32, blk []byte) {
		d := math.Float32frombits(le.Uint32(blk))
		for j := range QKK {
			out[j] = d * float32(int8(blk[4+j]))
		}
	})
}

// iq4nlValues is the non-linear 4-bit codebook of IQ4_NL and IQ4_XS.
var iq4nlValues = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// DequantizeIQ4_NL decodes IQ4_NL (d f16, qs [16]byte): x = d*table[code],
// codes packed as in Q4_0.
func DequantizeIQ4_NL(dst []float32, src []byte) {
	blocks(dst, src, TypeIQ4_NL, func(out []float32, blk []byte) {
		d := f16(blk)
		qs := blk[2:]
		for j := range 16 {
			out[j] = d * float32(iq4nlValues[qs[j]&15])
			out[j+16] = d * float32(iq4nlValues[qs[j]>>4])
		}
	})
}

// DequantizeIQ4_XS decodes IQ4_XS (d f16, scales_h u16, scales_l [4]byte,
// qs [128]byte): 8 groups of 32 IQ4_NL codes, each with a 6-bit scale
// (offset 32): low nibble from scales_l, high bit pair from scales_h.
func DequantizeIQ4_XS(dst []float32, src []byte) {
	blocks(dst, src, TypeIQ4_XS, func(out []float32, blk []byte) {
		d := f16(blk)
		sh := le.Uint16(blk[2:])
		sl := blk[4:8]
		qs := blk[8:]
		for ib := range 8 {
			ls := int(sl[ib/2]>>(4*(ib%2))&15) | int(sh>>(2*ib)&3)<<4
			dl := d * float32(ls-32)
			for j := range 16 {
				out[32*ib+j] = dl * float32(iq4nlValues[qs[j]&15])
				out[32*ib+j+16] = dl * float32(iq4nlValues[qs[j]>>4])
			}
			qs = qs[16:]
		}
	})
}

// mxfp4Values are the FP4 (E2M1) values, doubled so they are integers; the
// block scale is halved to compensate.
var mxfp4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// e8m0Half is 2^(e-128): half the E8M0 scale 2^(e-127).
func e8m0Half(e byte) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// DequantizeMXFP4 decodes MXFP4 (e u8 E8M0 scale, qs [16]byte of E2M1
// codes packed as in Q4_0): x = 2^(e-127) * fp4(code).
func DequantizeMXFP4(dst []float32, src []byte) {
	blocks(dst, src, TypeMXFP4, func(out []float32, blk []byte) {
		d := e8m0Half(blk[0])
		qs := blk[1:]
		for j := range 16 {
			out[j] = float32(mxfp4Values[qs[j]&15]) * d
			out[j+16] = float32(mxfp4Values[qs[j]>>4]) * d
		}
	})
}
