package kernel

import (
	"math"
	"sync"

	"github.com/aotlm/aotlm/internal/tensor"
)

// GELU as llama.cpp's CPU backend computes it (ggml's GGML_GELU_FP16
// path; the plan op gelu_f16): the input rounded to binary16 indexes a table of
// the tanh-approximated GELU of every binary16 value, itself rounded to
// binary16; inputs at or below -10 give 0, at or above 10 themselves.

var (
	geluF16Once  sync.Once
	geluF16Table []float32 // by binary16 bit pattern, the result as float32
)

// geluF16Tab returns the table, made on first use.
func geluF16Tab() []float32 {
	geluF16Once.Do(func() {
		geluF16Table = make([]float32, 1<<16)
		for h := range geluF16Table {
			x := tensor.F16ToF32(uint16(h))
			geluF16Table[h] = tensor.F16ToF32(tensor.F32ToF16(geluTanh32(x)))
		}
	})
	return geluF16Table
}

// geluTanh32 is ggml's float GELU: 0.5x(1 + tanh(sqrt(2/pi) x (1 +
// 0.044715 x^2))).
func geluTanh32(x float32) float32 {
	const c, a = float32(0.79788456080286535587989211986876), float32(0.044715)
	return 0.5 * x * (1 + float32(math.Tanh(float64(c*x*(1+a*x*x)))))
}

// GELUF16 sets, for i < len(dst), dst[i] to the GELU of x[i] through
// llama.cpp's binary16 table. It is plain Go (a table lookup), its own
// reference.
func GELUF16(dst, x []float32) {
	tab := geluF16Tab()
	for i := range dst {
		v := x[i]
		switch {
		case v <= -10:
			dst[i] = 0
		case v >= 10:
			dst[i] = v
		default:
			dst[i] = tab[tensor.F32ToF16(v)]
		}
	}
}
