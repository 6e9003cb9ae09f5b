package tensor

import (
	"math"
	"math/rand"
	"testing"
)

// TestF16RoundTrip checks every binary16 bit pattern survives f16->f32->f16.
func TestF16RoundTrip(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := F16ToF32(h)
		if math.IsNaN(float64(f)) {
			if back := F32ToF16(f); back&0x7c00 != 0x7c00 || back&0x3ff == 0 {
				t.Fatalf("NaN %#04x came back as %#04x", h, back)
			}
			continue
		}
		if back := F32ToF16(f); back != h {
			t.Fatalf("f16 %#04x -> %v -> %#04x", h, f, back)
		}
	}
}

// TestF32ToF16Nearest checks rounding against a float64 search of the nearest
// binary16 value on random inputs across the f16 range.
func TestF32ToF16Nearest(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 200000; i++ {
		f := float32(r.NormFloat64() * math.Pow(2, float64(r.Intn(40)-24)))
		h := F32ToF16(f)
		got := float64(F16ToF32(h))
		if math.IsInf(got, 0) {
			if math.Abs(float64(f)) < 65504 {
				t.Fatalf("%v overflowed to inf", f)
			}
			continue
		}
		// neighbours must not be strictly closer
		for _, n := range []uint16{h + 1, h - 1} {
			if n&0x7c00 == 0x7c00 {
				continue
			}
			alt := float64(F16ToF32(n))
			if math.Abs(alt-float64(f)) < math.Abs(got-float64(f)) {
				t.Fatalf("%v -> %v but %v is closer", f, got, alt)
			}
		}
	}
}

func TestBF16(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for i := 0; i < 100000; i++ {
		f := float32(r.NormFloat64() * 100)
		got := BF16ToF32(F32ToBF16(f))
		if rel := math.Abs(float64(got-f)) / math.Abs(float64(f)); rel > 1.0/256 {
			t.Fatalf("bf16(%v) = %v, rel err %v", f, got, rel)
		}
	}
	if BF16ToF32(0x3f80) != 1 {
		t.Fatal("bf16 0x3f80 is not 1")
	}
}

func TestByteSize(t *testing.T) {
	if n, err := Q4_0.ByteSize(64); err != nil || n != 36 {
		t.Fatalf("q4_0 64 values: %d %v", n, err)
	}
	if _, err := Q8_0.ByteSize(33); err == nil {
		t.Fatal("33 q8_0 values accepted")
	}
	if _, err := NumElements([]int64{1 << 40, 1 << 40}); err == nil {
		t.Fatal("overflowing shape accepted")
	}
}
