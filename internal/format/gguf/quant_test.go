package gguf

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/tensor"
)

// Error budgets, derived from the reference rounding. With d the float32
// scale and d16 its f16 rounding, |d - d16| <= f16err(d) = max(|d|*2^-11,
// 2^-25) (half an ulp; the second term for subnormal f16 below 2^-14):
//
//	Q8_0: |x - d16*q| <= |d|/2 + 127*f16err(d)
//	Q4_0: |x - d16*q| <= |d|/2 + 8*f16err(d)
//	      codes clamped at 15 (x/d in (7.5, 8]): |d| + 8*f16err(d)
//
// plus float32 rounding, covered by a slack of 1e-6 of the block's largest
// magnitude.
func f16err(d float64) float64 { return max(math.Abs(d)*0x1p-11, 0x1p-25) }

const slack = 1e-6

func q8Budget(d float64) float64 { return math.Abs(d)/2 + 127*f16err(d) }

func q4Budget(d float64, clamped bool) float64 {
	if clamped {
		return math.Abs(d) + 8*f16err(d)
	}
	return math.Abs(d)/2 + 8*f16err(d)
}

func TestQ8_0Error(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, scale := range []float64{1, 1e-3, 1e3} {
		x := randn(r, 32*4096)
		for i := range x {
			x[i] *= float32(scale)
		}
		y := make([]float32, len(x))
		DequantizeQ8_0(y, QuantizeQ8_0(x))
		var sq float64
		for b := 0; b < len(x)/QK; b++ {
			var amax float64
			for _, v := range x[b*QK : (b+1)*QK] {
				amax = max(amax, math.Abs(float64(v)))
			}
			d := amax / 127
			for i := b * QK; i < (b+1)*QK; i++ {
				e := math.Abs(float64(x[i] - y[i]))
				sq += e * e
				if e > q8Budget(d)+slack*amax {
					t.Fatalf("scale %g: x[%d] = %v decoded %v, error %g > budget %g", scale, i, x[i], y[i], e, q8Budget(d))
				}
			}
		}
		// The error of round-to-nearest is about uniform on [-d/2, d/2]:
		// RMS d/sqrt(12); with amax of 32 normals about 2.0-2.5 that is
		// under 0.006*scale. Allow 0.01*scale.
		if rms := math.Sqrt(sq / float64(len(x))); rms > 0.01*scale {
			t.Errorf("scale %g: RMS error %g > %g", scale, rms, 0.01*scale)
		}
	}
}

func TestQ4_0Error(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, scale := range []float64{1, 1e-3, 1e3} {
		x := randn(r, 32*4096)
		for i := range x {
			x[i] *= float32(scale)
		}
		y := make([]float32, len(x))
		DequantizeQ4_0(y, QuantizeQ4_0(x))
		var sq float64
		for b := 0; b < len(x)/QK; b++ {
			var amax, m float64
			for _, v := range x[b*QK : (b+1)*QK] {
				if a := math.Abs(float64(v)); a > amax {
					amax, m = a, float64(v)
				}
			}
			d := m / -8
			for i := b * QK; i < (b+1)*QK; i++ {
				e := math.Abs(float64(x[i] - y[i]))
				sq += e * e
				budget := q4Budget(d, float64(x[i])/d > 7.5)
				if e > budget+slack*amax {
					t.Fatalf("scale %g: x[%d] = %v decoded %v, error %g > budget %g", scale, i, x[i], y[i], e, budget)
				}
			}
		}
		// Step |d| = amax/8, about 0.3*scale: RMS near 0.3/sqrt(12) = 0.087.
		if rms := math.Sqrt(sq / float64(len(x))); rms > 0.12*scale {
			t.Errorf("scale %g: RMS error %g > %g", scale, rms, 0.12*scale)
		}
	}
}

// TestBlockLayout decodes hand-built blocks following ggml's documented
// layouts: Q8_0 = f16 d, 32 int8; Q4_0 = f16 d, 16 bytes, element j in the
// low nibble of byte j and element j+16 in its high nibble, offset 8.
func TestBlockLayout(t *testing.T) {
	q8 := make([]byte, q8BlockBytes)
	binary.LittleEndian.PutUint16(q8, 0x3800) // 0.5
	for i := range QK {
		q8[2+i] = byte(int8(i - 16))
	}
	y := make([]float32, QK)
	DequantizeQ8_0(y, q8)
	for i, v := range y {
		if want := float32(i-16) * 0.5; v != want {
			t.Errorf("Q8_0[%d] = %v, want %v", i, v, want)
		}
	}
	q4 := make([]byte, q4BlockBytes)
	binary.LittleEndian.PutUint16(q4, 0xc000) // -2
	for j := range QK / 2 {
		q4[2+j] = byte(j) | byte(15-j)<<4
	}
	DequantizeQ4_0(y, q4)
	for j := range QK / 2 {
		if y[j] != float32(j-8)*-2 || y[j+16] != float32(7-j)*-2 {
			t.Errorf("Q4_0[%d], [%d] = %v, %v; want %v, %v", j, j+16, y[j], y[j+16], float32(j-8)*-2, float32(7-j)*-2)
		}
	}
}

// TestQuantizeReference checks the reference rounding rules on chosen blocks.
func TestQuantizeReference(t *testing.T) {
	x := make([]float32, QK)
	// All zero: d = 0; Q8_0 codes 0; Q4_0 codes trunc(0 + 8.5) = 8.
	for i, b := range QuantizeQ8_0(x) {
		if b != 0 {
			t.Errorf("Q8_0 of zeros: byte %d = %#x", i, b)
		}
	}
	for i, b := range QuantizeQ4_0(x)[2:] {
		if b != 0x88 {
			t.Errorf("Q4_0 of zeros: code byte %d = %#x, want 0x88", i, b)
		}
	}
	// Q8_0: amax 127 gives d = 1 exactly; 2.5 rounds half away from zero to 3, -2.5 to -3.
	x[0], x[1], x[2], x[3] = 127, 2.5, -2.5, 0.49
	q := QuantizeQ8_0(x)
	if d := tensor.F16ToF32(binary.LittleEndian.Uint16(q)); d != 1 {
		t.Errorf("Q8_0 d = %v, want 1", d)
	}
	for i, want := range []int8{127, 3, -3, 0} {
		if got := int8(q[2+i]); got != want {
			t.Errorf("Q8_0 code %d = %d, want %d", i, got, want)
		}
	}
	// Q4_0: the value of largest magnitude is 8 (positive), so d = -1 and
	// codes are min(15, trunc(-x + 8.5)): 8 -> 0, -8 -> 15 (clamped from 16),
	// 0.5 -> 8, -0.5 -> 9 (ties go up).
	x = make([]float32, QK)
	x[0], x[1], x[2], x[16] = 8, -8, 0.5, -0.5
	q = QuantizeQ4_0(x)
	if d := tensor.F16ToF32(binary.LittleEndian.Uint16(q)); d != -1 {
		t.Errorf("Q4_0 d = %v, want -1", d)
	}
	if lo, hi := q[2]&15, q[2]>>4; lo != 0 || hi != 9 {
		t.Errorf("Q4_0 byte 0 = %#x, want low 0 (x[0]) and high 9 (x[16])", q[2])
	}
	if q[3]&15 != 15 || q[4]&15 != 8 {
		t.Errorf("Q4_0 codes of -8 and 0.5 = %d, %d; want 15, 8", q[3]&15, q[4]&15)
	}
}
