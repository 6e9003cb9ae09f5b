package quant

import (
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/tensor"
)

// KindF16 is IEEE binary16, no quantization.
const KindF16 Kind = "f16"

func init() {
	register(&SchemeInfo{
		Kind:      KindF16,
		Rule:      "w = float32(h), h IEEE binary16",
		Bits:      16,
		Layout:    "f16-rows",
		Recipe:    true,
		Tolerance: 1e-3,
		check:     noModeNoHQQ,
		name:      kindName,
		json:      noFields,
		quantize: func(w []float32, rows, cols int, _ Scheme) (*Quantized, error) {
			return QuantizeF16(w, rows, cols)
		},
		dequantizeRow: func(q *Quantized, r int, row []float32) {
			for c, h := range q.Half[r*q.Cols : (r+1)*q.Cols] {
				row[c] = tensor.F16ToF32(h)
			}
		},
		bits: func(*Quantized) float64 { return 16 },
	})
}

// f16 storage: every weight rounded to IEEE binary16, nearest even. Values
// beyond the f16 range (|w| > 65504) would become infinities and are refused.

// MaxF16 is the largest finite binary16 value.
const MaxF16 = 65504

// EncodeF16 converts src to binary16 bits, rounding to nearest even.
func EncodeF16(src []float32) []uint16 {
	out := make([]uint16, len(src))
	for i, v := range src {
		out[i] = tensor.F32ToF16(v)
	}
	return out
}

// DecodeF16 converts binary16 bits to float32 exactly.
func DecodeF16(src []uint16) []float32 {
	out := make([]float32, len(src))
	for i, h := range src {
		out[i] = tensor.F16ToF32(h)
	}
	return out
}

// RoundTripF16 returns src rounded to binary16 and back, as a model stored in
// f16 sees its weights.
func RoundTripF16(src []float32) []float32 {
	out := make([]float32, len(src))
	for i, v := range src {
		out[i] = tensor.F16ToF32(tensor.F32ToF16(v))
	}
	return out
}

// QuantizeF16 stores the row-major weight w [rows, cols] as f16, refusing
// values that f16 cannot hold.
func QuantizeF16(w []float32, rows, cols int) (*Quantized, error) {
	if err := checkMatrix(w, rows, cols); err != nil {
		return nil, fmt.Errorf("quant: f16: %w", err)
	}
	for i, v := range w {
		if math.Abs(float64(v)) > MaxF16 {
			return nil, fmt.Errorf("quant: f16: weight [%d, %d] = %v exceeds the f16 range", i/cols, i%cols, v)
		}
	}
	return &Quantized{Scheme: Scheme{Kind: KindF16}, Rows: rows, Cols: cols, Half: EncodeF16(w)}, nil
}
