package kernel

import "github.com/aotlm/aotlm/internal/tensor"

// Dot returns Σ_i a[i]*b[i] for len(a) == len(b) elements, in float32
// (the overlays sum in several lanes, so the order differs from the loop).
func Dot(a, b []float32) float32 { return dotImpl(a, b[:len(a)]) }

func dotGeneric(a, b []float32) float32 {
	var s float32
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

// Axpy sets y[i] += alpha*x[i] for len(y) == len(x) elements.
func Axpy(y []float32, alpha float32, x []float32) { axpyImpl(y, alpha, x[:len(y)]) }

func axpyGeneric(y []float32, alpha float32, x []float32) {
	for i, v := range x {
		y[i] += alpha * v
	}
}

// DotF16 returns Σ_i a[i]*f16(b[i]) for IEEE binary16 b.
func DotF16(a []float32, b []uint16) float32 { return dotF16Impl(a, b[:len(a)]) }

func dotF16Generic(a []float32, b []uint16) float32 {
	var s float32
	for i, v := range a {
		s += v * tensor.F16ToF32(b[i])
	}
	return s
}

// AxpyF16 sets y[i] += alpha*f16(x[i]) for IEEE binary16 x.
func AxpyF16(y []float32, alpha float32, x []uint16) { axpyF16Impl(y, alpha, x[:len(y)]) }

func axpyF16Generic(y []float32, alpha float32, x []uint16) {
	for i, v := range x {
		y[i] += alpha * tensor.F16ToF32(v)
	}
}
