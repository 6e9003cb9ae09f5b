//go:build !purego

package kernel

import "github.com/aotlm/aotlm/internal/tensor"

// The float kernels handle the first n&^15 elements; the wrappers add
// the rest in Go.

//go:noescape
func dotNEON(a, b *float32, n int) float32

//go:noescape
func dotF16NEON(a *float32, b *uint16, n int) float32

//go:noescape
func axpyNEON(y, x *float32, alpha float32, n int)

//go:noescape
func axpyF16NEON(y *float32, x *uint16, alpha float32, n int)

func dotArm64(a, b []float32) float32 {
	b = b[:len(a)]
	m := len(a) &^ 15
	var s float32
	if m > 0 {
		s = dotNEON(&a[0], &b[0], m)
	}
	for i := m; i < len(a); i++ {
		s += a[i] * b[i]
	}
	return s
}

func dotF16Arm64(a []float32, b []uint16) float32 {
	b = b[:len(a)]
	m := len(a) &^ 15
	var s float32
	if m > 0 {
		s = dotF16NEON(&a[0], &b[0], m)
	}
	for i := m; i < len(a); i++ {
		s += a[i] * tensor.F16ToF32(b[i])
	}
	return s
}

func axpyArm64(y []float32, alpha float32, x []float32) {
	x = x[:len(y)]
	m := len(y) &^ 15
	if m > 0 {
		axpyNEON(&y[0], &x[0], alpha, m)
	}
	for i := m; i < len(y); i++ {
		y[i] += alpha * x[i]
	}
}

func axpyF16Arm64(y []float32, alpha float32, x []uint16) {
	x = x[:len(y)]
	m := len(y) &^ 15
	if m > 0 {
		axpyF16NEON(&y[0], &x[0], alpha, m)
	}
	for i := m; i < len(y); i++ {
		y[i] += alpha * tensor.F16ToF32(x[i])
	}
}
