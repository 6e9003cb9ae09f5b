//go:build !purego

package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestArm64Overlays checks the overlay list and the feature detection.
func TestArm64Overlays(t *testing.T) {
	o := Overlays()
	if len(o) != 3 || o[0].Name != "neon" || o[1].Name != "dotprod" || o[2].Name != "i8mm" {
		t.Fatalf("overlays %v, want neon, dotprod, i8mm", o)
	}
	i8mm := cpu.ARM64.HasI8MM && cpu.ARM64.HasASIMDDP
	if !o[0].Supported || o[1].Supported != cpu.ARM64.HasASIMDDP || o[2].Supported != i8mm {
		t.Fatalf("supported: neon %v, dotprod %v, i8mm %v (cpu has SDOT: %v, SMMLA: %v)", o[0].Supported, o[1].Supported, o[2].Supported, cpu.ARM64.HasASIMDDP, cpu.ARM64.HasI8MM)
	}
	want := "neon"
	if cpu.ARM64.HasASIMDDP {
		want = "neon+dotprod"
	}
	if i8mm {
		want += "+i8mm"
	}
	if got := Active(); got != want {
		t.Fatalf("Active() = %q, want %q", got, want)
	}
	t.Logf("active: %s", Active())
}

// TestArm64QuantizeTies checks that halfway products round to even like
// the generic rule: with amax 127 the inverse scale is exactly 1.
func TestArm64QuantizeTies(t *testing.T) {
	x := make([]float32, 2*QK)
	for i := range QK {
		x[i] = float32(i) - 15.5 // ±0.5, ±1.5, ...
	}
	x[QK-1] = 127
	for i := QK; i < 2*QK; i++ {
		x[i] = -float32(i-QK) - 0.5
	}
	x[QK] = -127
	q0, d0, s0 := make([]int8, 2*QK), make([]float32, 2), make([]int32, 2)
	quantizeQ8Generic(q0, d0, s0, x)
	if q0[15] != 0 || q0[16] != 0 || q0[14] != -2 || q0[17] != 2 || q0[QK+3] != -4 {
		t.Fatalf("generic: ties %v", q0[14:18])
	}
	q1, d1, s1 := make([]int8, 2*QK), make([]float32, 2), make([]int32, 2)
	quantizeQ8Arm64(q1, d1, s1, x)
	for i := range q0 {
		if q0[i] != q1[i] {
			t.Fatalf("q[%d] = %d, want %d (x %g)", i, q1[i], q0[i], x[i])
		}
	}
	if d0[0] != d1[0] || d0[1] != d1[1] || s0[0] != s1[0] || s0[1] != s1[1] {
		t.Fatalf("d %v sum %v, want %v %v", d1, s1, d0, s0)
	}
}

// TestArm64MatMulLarge runs shapes whose rows span several chunks, and
// extreme codes and activations (the widest int16 partial sums of the
// non-SDOT kernels), against the generic products.
func TestArm64MatMulLarge(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	abs := func(row func([]float32, int), K int) func(int) []float32 {
		return func(n int) []float32 {
			v := make([]float32, K)
			row(v, n)
			for i := range v {
				v[i] = abs32(v[i])
			}
			return v
		}
	}
	for _, o := range supported(t) {
		for _, c := range []struct {
			N, K, T int
			extreme bool
		}{{150, 128 * QK, 9, false}, {300, 64 * QK, 5, false}, {6, 8 * QK, 5, true}} {
			x, xf := randQ8(r, c.T, c.K)
			q4 := randQ4(r, c.N, c.K, true, false)
			q4s := randQ4(r, c.N, c.K, false, false)
			w8 := randW8(r, c.N, c.K)
			if c.extreme {
				xe := make([]float32, c.T*c.K)
				for i := range xe {
					xe[i] = float32(1 - 2*(i/QK%2)) // blocks of all +127 or all -127
				}
				x.Quantize(xe, c.T)
				xf = xe
				for i := range q4.Nib {
					q4.Nib[i], q4s.Nib[i] = 0, 0xff // codes 0 (-8) and 15 (+7)
				}
				for i := range w8.U {
					w8.U[i] = uint8(255 * (i / QK % 2)) // q -128 or +127
				}
			}
			name := fmt.Sprintf("%s N %d K %d", o.Name, c.N, c.K)
			if o.Q4MatMul != nil {
				for _, w := range []*Q4{q4, q4s} {
					checkMatMul(t, name+" q4", c.N, c.K, c.T, 0, c.N, abs(w.Row, c.K), x, xf,
						func(d []float32, l int, x *Q8, a, b int) { q4MatMulGeneric(d, l, w, x, a, b) },
						func(d []float32, l int, x *Q8, a, b int) { o.Q4MatMul(d, l, w, x, a, b) })
				}
			}
			if o.W8MatMul != nil {
				checkMatMul(t, name+" w8", c.N, c.K, c.T, 1, c.N-1, abs(w8.Row, c.K), x, xf,
					func(d []float32, l int, x *Q8, a, b int) { w8MatMulGeneric(d, l, w8, x, a, b) },
					func(d []float32, l int, x *Q8, a, b int) { o.W8MatMul(d, l, w8, x, a, b) })
			}
		}
	}
}
