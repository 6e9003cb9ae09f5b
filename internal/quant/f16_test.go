package quant

import (
	"math"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/tensor"
)

// TestF16RoundTrip: QuantizeF16 stores exactly tensor.F32ToF16 of each
// weight, dequantizes through tensor.F16ToF32, and the relative error of
// normal values is at most 2^-11 (half an f16 ulp).
func TestF16RoundTrip(t *testing.T) {
	w := gaussian(61, 32*64, 1)
	w[0], w[1], w[2] = 65504, -1e-7, 0
	q, err := QuantizeF16(w, 32, 64)
	if err != nil {
		t.Fatal(err)
	}
	rt := RoundTripF16(w)
	dec := DecodeF16(EncodeF16(w))
	for i, v := range q.Dequantize() {
		if q.Half[i] != tensor.F32ToF16(w[i]) || v != rt[i] || v != dec[i] {
			t.Fatalf("w[%d] = %v: f16 %#04x -> %v, round trip %v", i, w[i], q.Half[i], v, rt[i])
		}
		if a := math.Abs(float64(w[i])); a >= 6.103515625e-05 { // smallest normal f16
			if e := math.Abs(float64(w[i]-v)) / a; e > 1.0/2048 {
				t.Fatalf("w[%d] = %v: relative error %g > 2^-11", i, w[i], e)
			}
		}
	}
	if bits := q.BitsPerWeight(); bits != 16 {
		t.Errorf("bits/weight = %v", bits)
	}
	w[5] = 70000
	if _, err := QuantizeF16(w, 32, 64); err == nil || !strings.Contains(err.Error(), "weight [0, 5]") {
		t.Errorf("out of range: %v", err)
	}
}
