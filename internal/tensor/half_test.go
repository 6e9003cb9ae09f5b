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

// TestF32ToF16Ties checks round-half-to-even on every exact midpoint
// between two consecutive binary16 values (both signs, subnormal, normal
// and the step from 65504 to infinity), and one float32 ulp either side.
func TestF32ToF16Ties(t *testing.T) {
	for h := uint16(0); h < 0x7c00; h++ {
		lo, hi := float64(F16ToF32(h)), float64(F16ToF32(h+1))
		if h == 0x7bff {
			hi = 65536 // the next step is infinity
		}
		mid := float32((lo + hi) / 2)
		if float64(mid) != (lo+hi)/2 {
			t.Fatalf("midpoint of %#04x is not a float32", h)
		}
		even := h
		if h&1 == 1 {
			even = h + 1
		}
		for _, sign := range []uint16{0, 0x8000} {
			m := mid
			if sign != 0 {
				m = -mid
			}
			if got := F32ToF16(m); got != even|sign {
				t.Fatalf("%v (between %#04x and %#04x) -> %#04x, want %#04x", m, h|sign, (h+1)|sign, got, even|sign)
			}
		}
		below := math.Nextafter32(mid, 0)
		above := math.Nextafter32(mid, float32(math.Inf(1)))
		if got := F32ToF16(below); got != h {
			t.Fatalf("%v, just below the midpoint of %#04x, -> %#04x", below, h, got)
		}
		if got := F32ToF16(above); got != h+1 {
			t.Fatalf("%v, just above the midpoint of %#04x, -> %#04x", above, h, got)
		}
	}
}
