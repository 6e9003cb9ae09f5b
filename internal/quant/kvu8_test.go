package quant

import (
	"math"
	"strings"
	"testing"
)

// kvRows returns T rows of [H, D] whose head h has standard deviation
// 0.25 * 2^h, so heads differ in range as real K caches do.
func kvRows(seed uint64, T, H, D int) []float32 {
	x := gaussian(seed, T*H*D, 1)
	for i := range x {
		x[i] *= float32(0.25 * math.Exp2(float64(i/D%H)))
	}
	return x
}

// TestKVRoundTrip: calibrate on past rows, then store both those and new
// rows with the same parameters: |x - x'| <= s/2 (s of the head) wherever
// |x| <= clip, saturation at +-clip beyond, bytes in 1..255.
func TestKVRoundTrip(t *testing.T) {
	const T, H, D = 64, 4, 32
	past := kvRows(51, T, H, D)
	for _, perHead := range []bool{false, true} {
		cal, err := NewKVCalibrator(H, D)
		if err != nil {
			t.Fatal(err)
		}
		if err := cal.Observe(past); err != nil {
			t.Fatal(err)
		}
		if cal.Rows() != T {
			t.Fatalf("rows = %d", cal.Rows())
		}
		kv, err := cal.Params(perHead)
		if err != nil {
			t.Fatal(err)
		}
		if kv.PerHead() != perHead {
			t.Fatalf("PerHead = %v", kv.PerHead())
		}
		// new rows: same distribution, plus some beyond the calibrated clip
		fresh := kvRows(52, 8, H, D)
		fresh[3] = 1e3
		fresh[D+1] = -1e3
		all := append(append([]float32(nil), past...), fresh...)
		u := make([]uint8, len(all))
		if err := kv.Quantize(u, all); err != nil {
			t.Fatal(err)
		}
		// row by row gives the same bytes: parameters never depend on the data
		one := make([]uint8, H*D)
		for r := 0; r < len(all)/(H*D); r++ {
			if err := kv.Quantize(one, all[r*H*D:(r+1)*H*D]); err != nil {
				t.Fatal(err)
			}
			if string(one) != string(u[r*H*D:(r+1)*H*D]) {
				t.Fatalf("row %d differs when stored alone", r)
			}
		}
		back := make([]float32, len(all))
		if err := kv.Dequantize(back, u); err != nil {
			t.Fatal(err)
		}
		for i, x := range all {
			h := i / D % H
			s := float64(kv.scale(h))
			clip := 127 * s
			if u[i] == 0 {
				t.Fatalf("byte 0 written at %d", i)
			}
			if math.Abs(float64(x)) <= clip {
				if e := math.Abs(float64(x) - float64(back[i])); !within(e, s/2, clip) {
					t.Fatalf("perHead=%v: x[%d] = %g error %g > s/2 = %g", perHead, i, x, e, s/2)
				}
			} else if math.Abs(float64(back[i])-math.Copysign(127*float64(kv.scale(h)), float64(x))) > 1e-6*clip {
				t.Fatalf("x[%d] = %g beyond clip %g stored as %g, want saturation", i, x, clip, back[i])
			}
		}
	}
}

// TestKVPerHeadBetter: with heads of different ranges, per-head scales have a
// lower error than one per-tensor scale (each head's scale is at most the
// tensor's); both are measured and logged.
func TestKVPerHeadBetter(t *testing.T) {
	const T, H, D = 64, 4, 32
	x := kvRows(53, T, H, D)
	cal, _ := NewKVCalibrator(H, D)
	if err := cal.Observe(x); err != nil {
		t.Fatal(err)
	}
	var rmse [2]float64
	for j, perHead := range []bool{false, true} {
		kv, err := cal.Params(perHead)
		if err != nil {
			t.Fatal(err)
		}
		u := make([]uint8, len(x))
		back := make([]float32, len(x))
		if err := kv.Quantize(u, x); err != nil {
			t.Fatal(err)
		}
		if err := kv.Dequantize(back, u); err != nil {
			t.Fatal(err)
		}
		st, _ := Compare(x, back)
		rmse[j] = st.RMSE
		t.Logf("perHead=%v scales=%v: %v", perHead, kv.Scales, st)
	}
	if !(rmse[1] < rmse[0]) {
		t.Errorf("per-head RMSE %g not below per-tensor %g", rmse[1], rmse[0])
	}
}

func TestKVBadInput(t *testing.T) {
	if _, err := NewKVQuant(0, 8, []float32{1}); err == nil {
		t.Error("0 heads accepted")
	}
	if _, err := NewKVQuant(4, 8, []float32{1, 2}); err == nil || !strings.Contains(err.Error(), "2 clip values for 4 heads") {
		t.Errorf("clip count: %v", err)
	}
	if _, err := NewKVQuant(1, 8, []float32{float32(math.NaN())}); err == nil {
		t.Error("NaN clip accepted")
	}
	if _, err := NewKVQuant(1, 8, []float32{-1}); err == nil {
		t.Error("negative clip accepted")
	}
	kv, err := NewKVQuant(2, 4, []float32{0})
	if err != nil {
		t.Fatal(err)
	}
	u := make([]uint8, 8)
	if err := kv.Quantize(u, []float32{1, 2, 3, 4, 5, 6, 7, 8}); err != nil {
		t.Fatal(err)
	}
	for _, b := range u {
		if b != KVZeroPoint {
			t.Fatalf("zero clip stored %d", b)
		}
	}
	if err := kv.Quantize(u[:6], make([]float32, 6)); err == nil || !strings.Contains(err.Error(), "whole rows of 8") {
		t.Errorf("partial row: %v", err)
	}
	if err := kv.Dequantize(make([]float32, 7), u); err == nil {
		t.Error("length mismatch accepted")
	}
	nan, _ := NewKVQuant(1, 2, []float32{1})
	if err := nan.Quantize(u[:2], []float32{float32(math.NaN()), 0}); err != nil || u[0] != KVZeroPoint {
		t.Errorf("NaN stored as %d (%v)", u[0], err)
	}
	cal, _ := NewKVCalibrator(2, 4)
	if err := cal.Observe(make([]float32, 5)); err == nil {
		t.Error("partial row observed")
	}
	if err := cal.Observe([]float32{0, 0, 0, float32(math.Inf(1)), 0, 0, 0, 0}); err == nil {
		t.Error("Inf observed")
	}
}
