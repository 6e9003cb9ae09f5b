package kernel

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/tensor"
)

// columnsImpls lists the generic ColumnsF16, the exported one and every
// supported overlay's.
func columnsImpls(t *testing.T) map[string]func(dst []uint16, stride int, src []float32, ld, T, n int) {
	out := map[string]func(dst []uint16, stride int, src []float32, ld, T, n int){
		"generic": columnsF16Generic, "exported": ColumnsF16,
	}
	for _, o := range Overlays() {
		if !o.Supported || o.ColumnsF16 == nil {
			t.Logf("overlay %s: no ColumnsF16 of its own or not supported here, not tested", o.Name)
			continue
		}
		out[o.Name] = o.ColumnsF16
	}
	return out
}

// columnsValue draws a float32 that exercises binary16 rounding: mostly
// plain values, and some at the edges (overflow to infinity, the largest
// finite values, subnormals, ties between two binary16 values, zeros of
// both signs, infinities and NaN).
func columnsValue(r *rand.Rand) float32 {
	sign := float32(1)
	if r.IntN(2) == 0 {
		sign = -1
	}
	switch r.IntN(12) {
	case 0:
		return sign * (65504 + r.Float32()*64) // rounds to 65504 or overflows
	case 1:
		return sign * r.Float32() * 1e-4 // subnormal and small normal binary16
	case 2:
		// a tie: a binary16 value plus half its last place
		h := tensor.F32ToF16(r.Float32() * 8)
		b := math.Float32bits(tensor.F16ToF32(h))
		return sign * math.Float32frombits(b+1<<12)
	case 3:
		return sign * float32(math.Inf(1))
	case 4:
		return []float32{0, float32(math.Copysign(0, -1)), float32(math.NaN()), 1e30}[r.IntN(4)]
	default:
		return sign * r.Float32() * 4
	}
}

// TestColumnsF16 stores T rows of n values as columns with every
// implementation and compares every binary16 value with
// tensor.F32ToF16 bit for bit (a NaN must stay a NaN), at unaligned
// starts, with every element of dst outside the columns' T values a
// guard that must not change.
func TestColumnsF16(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	impls := columnsImpls(t)
	const guard16 = 0xbeef
	cases := [][2]int{{128, 1024}, {128, 192}, {64, 512}, {33, 17}, {17, 300}}
	for T := 0; T <= 40; T++ {
		for _, n := range []int{0, 1, 2, 5, 15, 16, 17, 31, 40} {
			cases = append(cases, [2]int{T, n})
		}
	}
	// One row into adjacent columns (stride 1): a row of a head-major
	// cache, decode's store, on the contiguous row kernel.
	var rows [][2]int
	for n := 0; n <= 70; n++ {
		rows = append(rows, [2]int{1, n})
	}
	rows = append(rows, [2]int{1, 128}, [2]int{1, 1024}, [2]int{1, 300})
	for i, c := range append(cases, rows...) {
		T, n := c[0], c[1]
		ld, stride := n+r.IntN(5), T+r.IntN(40)
		if i >= len(cases) {
			stride = 1
		}
		soff, doff := r.IntN(4), r.IntN(4)
		src := make([]float32, soff+max(0, (T-1)*ld+n)+r.IntN(3))
		for i := range src {
			src[i] = columnsValue(r)
		}
		src = src[soff:]
		size := max(0, (n-1)*stride+T)
		for name, f := range impls {
			buf := make([]uint16, doff+size+8)
			for i := range buf {
				buf[i] = guard16
			}
			dst := buf[doff : doff+size]
			f(dst, stride, src, ld, T, n)
			written := make([]bool, len(buf))
			for j := 0; j < n; j++ {
				for tt := 0; tt < T; tt++ {
					i := doff + j*stride + tt
					written[i] = true
					x := src[tt*ld+j]
					got, want := buf[i], tensor.F32ToF16(x)
					if x != x {
						if got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
							t.Fatalf("%s T=%d n=%d: row %d col %d: NaN stored as %#04x", name, T, n, tt, j, got)
						}
						continue
					}
					if got != want {
						t.Fatalf("%s T=%d n=%d: row %d col %d: %g stored as %#04x, want %#04x", name, T, n, tt, j, x, got, want)
					}
				}
			}
			for i, v := range buf {
				if !written[i] && v != guard16 {
					t.Fatalf("%s T=%d n=%d ld=%d stride=%d: element %d outside the columns changed to %#04x", name, T, n, ld, stride, i-doff, v)
				}
			}
		}
	}
}

// TestColumnsF16Bounds checks that a source or destination one element
// short panics before anything is written.
func TestColumnsF16Bounds(t *testing.T) {
	const T, n, ld, stride = 20, 17, 19, 23
	src := make([]float32, (T-1)*ld+n)
	for i := range src {
		src[i] = float32(i) + 0.5
	}
	dst := make([]uint16, (n-1)*stride+T)
	for _, c := range []struct {
		name string
		call func()
	}{
		{"short src", func() { ColumnsF16(dst, stride, src[:len(src)-1], ld, T, n) }},
		{"short dst", func() { ColumnsF16(dst[:len(dst)-1], stride, src, ld, T, n) }},
	} {
		clear(dst)
		if !panics(c.call) {
			t.Fatalf("%s: no panic", c.name)
		}
		for i, v := range dst {
			if v != 0 {
				t.Fatalf("%s: dst[%d] written before the panic", c.name, i)
			}
		}
	}
}

// BenchmarkColumnsF16 stores a Qwen3-0.6B-shape prefill chunk's keys (128
// tokens x 1024 columns) into a transposed binary16 cache; MB/s counts
// the float32 read.
func BenchmarkColumnsF16(b *testing.B) {
	const T, n, ctx = 128, 1024, 1024
	stride := ctx + 32 + 1
	r := rand.New(rand.NewPCG(43, 44))
	src := randFloats(r, T*n, 1)
	dst := make([]uint16, n*stride)
	b.SetBytes(int64(4 * T * n))
	for i := 0; i < b.N; i++ {
		ColumnsF16(dst[(i%4)*T:], stride, src, n, T, n)
	}
}
