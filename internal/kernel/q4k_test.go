package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// q4kParts are the integers and floats a random K4 weight is built from,
// kept apart from the record bytes so the tests can check the records.
type q4kParts struct {
	u        []uint8   // [N][K] codes 0..15
	sc, m    []uint8   // [N][nb] 6-bit
	d, dmin  []float32 // [N][nb/8]
	nb, nsup int
}

// randQ4K returns a random weight in the K4 form (6-bit scales and
// minimums over their whole range, d and dmin as Q4_K files have them).
func randQ4K(r *rand.Rand, N, K int) *Q4 {
	w, _ := randQ4KParts(r, N, K)
	return w
}

func randQ4KParts(r *rand.Rand, N, K int) (*Q4, *q4kParts) {
	nb := K / QK
	p := &q4kParts{u: make([]uint8, N*K), sc: make([]uint8, N*nb), m: make([]uint8, N*nb),
		d: make([]float32, N*nb/8), dmin: make([]float32, N*nb/8), nb: nb, nsup: nb / 8}
	for i := range p.u {
		p.u[i] = uint8(r.IntN(16))
	}
	for i := range p.sc {
		p.sc[i], p.m[i] = uint8(r.IntN(64)), uint8(r.IntN(64))
	}
	for i := range p.d {
		p.d[i] = 0.0005 + r.Float32()*0.002
		p.dmin[i] = 0.0002 + r.Float32()*0.002
	}
	w := &Q4{N: N, K: K, Nib: make([]byte, N*K/2)}
	if err := PackNibbles(w.Nib, p.u, N, K); err != nil {
		panic(err)
	}
	nc := q4KChunks(K)
	w.K4 = make([]byte, N*nc*Q4KChunkBytes)
	for n := range N {
		for c := range nc {
			b0, b1 := 16*c, min(16*c+16, nb)
			s0, s1 := b0/8, (b1+7)/8
			Q4KChunk(w.K4[(n*nc+c)*Q4KChunkBytes:], p.sc[n*nb+b0:n*nb+b1], p.m[n*nb+b0:n*nb+b1],
				p.d[n*p.nsup+s0:n*p.nsup+s1], p.dmin[n*p.nsup+s0:n*p.nsup+s1])
		}
	}
	if err := w.Check(); err != nil {
		panic(err)
	}
	return w, p
}

// value is the weight (n, k) by ggml's Q4_K formula.
func (p *q4kParts) value(n, k, K int) float32 {
	b := k / QK
	s := n*p.nsup + b/8
	scale, minimum := float32(p.d[s]*float32(p.sc[n*p.nb+b])), float32(p.dmin[s]*float32(p.m[n*p.nb+b]))
	return float32(scale*float32(p.u[n*K+k])) - minimum
}

// TestQ4KRow: the K4 records read back as ggml's Q4_K formula,
// d*sc*u - dmin*m, bit for bit, on every K with whole and half chunks.
func TestQ4KRow(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	for _, K := range []int{256, 512, 768, 1280, 2048} {
		const N = 3
		w, p := randQ4KParts(r, N, K)
		row := make([]float32, K)
		for n := range N {
			w.Row(row, n)
			for k := range K {
				if want := p.value(n, k, K); math.Float32bits(row[k]) != math.Float32bits(want) {
					t.Fatalf("K %d row %d input %d: %g, want %g", K, n, k, row[k], want)
				}
			}
		}
	}
}

// TestQ4KCheck: the K4 form refuses K not a multiple of 256, records of
// the wrong size, and scales or zero points beside it.
func TestQ4KCheck(t *testing.T) {
	r := rand.New(rand.NewPCG(73, 74))
	w := randQ4K(r, 2, 512)
	bad := []struct {
		name string
		edit func(w *Q4)
	}{
		{"short records", func(w *Q4) { w.K4 = w.K4[:len(w.K4)-1] }},
		{"K not a multiple of 256", func(w *Q4) { w.K, w.Nib = 480, w.Nib[:2*240] }},
		{"scales beside", func(w *Q4) { w.Scales = make([]float32, 2*16) }},
		{"zero points beside", func(w *Q4) { w.Zeros = make([]float32, 2*16) }},
	}
	for _, c := range bad {
		v := *w
		c.edit(&v)
		if err := v.Check(); err == nil {
			t.Errorf("%s: Check passed", c.name)
		}
	}
}

// TestQ4KGenericMatMul: the reference product of a K4 weight against the
// same sum taken in float64 from the parts (each block's
// D*(d*sc*Σu*q - dmin*m*Sum)), within float32 accumulation error.
func TestQ4KGenericMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(75, 76))
	for _, K := range []int{256, 768, 1024} {
		const N, T = 5, 3
		w, p := randQ4KParts(r, N, K)
		x, _ := randQ8(r, T, K)
		got := make([]float32, T*N)
		q4MatMulGeneric(got, N, w, x, 0, N)
		for tt := range T {
			for n := range N {
				var want, mag float64
				for k := range K {
					v := float64(p.value(n, k, K)) * float64(x.Q[tt*K+k]) * float64(x.D[tt*(K/QK)+k/QK])
					want += v
					mag += math.Abs(v)
				}
				if d := math.Abs(float64(got[tt*N+n]) - want); d > matMulTolerance*mag+1e-7 {
					t.Fatalf("K %d token %d row %d: %g, want %g", K, tt, n, got[tt*N+n], want)
				}
			}
		}
	}
}

// TestOverlaysQ4K: every overlay's product of a K4 weight, as it is
// (the overlays that take the form) and expanded (the others, through
// PrepareZeros' per-block form), matches the plain-Go reference on random
// weights and activations: K with whole chunks of 16 blocks and with a
// last half chunk, every token count through the tiles' shapes, row
// ranges with any start, guards around the output. The budget is
// matMulTolerance relative to Σ(|d*sc*u| + |dmin*m|)·|x|.
func TestOverlaysQ4K(t *testing.T) {
	r := rand.New(rand.NewPCG(77, 78))
	shapes := [][2]int{{1, 256}, {5, 512}, {17, 768}, {9, 1280}, {33, 1024}, {6, 3072}, {300, 256}}
	for _, o := range supported(t) {
		if o.Q4MatMul == nil {
			continue
		}
		for _, sh := range shapes {
			N, K := sh[0], sh[1]
			w, p := randQ4KParts(r, N, K)
			ex := *w
			ex.expandK4()
			rowAbs := func(n int) []float32 {
				v := make([]float32, K)
				for k := range v {
					b := k / QK
					s := n*p.nsup + b/8
					v[k] = p.d[s]*float32(p.sc[n*p.nb+b])*float32(p.u[n*K+k]) + p.dmin[s]*float32(p.m[n*p.nb+b])
				}
				return v
			}
			for _, T := range []int{1, 2, 3, 4, 5, 6, 7, 8, 16} {
				x, xf := randQ8(r, T, K)
				n0 := r.IntN(N)
				n1 := n0 + 1 + r.IntN(N-n0)
				if T == 1 && r.IntN(2) == 0 {
					n0, n1 = 0, N
				}
				ref := func(d []float32, l int, x *Q8, a, b int) { q4MatMulGeneric(d, l, w, x, a, b) }
				checkMatMul(t, fmt.Sprintf("%s q4 K4", o.Name), N, K, T, n0, n1, rowAbs, x, xf, ref,
					func(d []float32, l int, x *Q8, a, b int) { o.Q4MatMul(d, l, w, x, a, b) })
				checkMatMul(t, fmt.Sprintf("%s q4 K4 expanded", o.Name), N, K, T, n0, n1, rowAbs, x, xf, ref,
					func(d []float32, l int, x *Q8, a, b int) {
						o.Q4MatMul(d, l, ex.sym, x, a, b)
						ex.addZeroTerms(d, l, x, a, b)
					})
				if o.q4Zeros != nil {
					checkMatMul(t, fmt.Sprintf("%s q4 K4 expanded, fused", o.Name), N, K, T, n0, n1, rowAbs, x, xf, ref,
						func(d []float32, l int, x *Q8, a, b int) { o.q4Zeros(d, l, ex.sym, ex.zs, x, a, b) })
				}
			}
		}
	}
	// Through MatMul, prepared as the engine prepares it.
	w := randQ4K(r, 40, 768)
	w.PrepareZeros()
	x, xf := randQ8(r, 5, 768)
	checkMatMul(t, "MatMul q4 K4", 40, 768, 5, 3, 37, func(n int) []float32 {
		v := make([]float32, 768)
		for k := range v {
			sc, m := w.k4Block(n, k/QK)
			v[k] = 15*sc + m
		}
		return v
	}, x, xf, func(d []float32, l int, x *Q8, a, b int) { q4MatMulGeneric(d, l, w, x, a, b) }, w.MatMul)
}

// expandK4 turns a K4 weight into the per-block form with zero points,
// as the tests and benchmarks compare against:
// the same codes with zero point 8 and block scales d*sc (sym), and the
// block terms zs = (dmin*m - 8*d*sc)/8 (see PrepareZeros): per block,
// d*sc*(dot - 8*Sum) + zs*(-8*Sum) = d*sc*dot - dmin*m*Sum.
func (w *Q4) expandK4() {
	nb := w.K / QK
	sc := make([]float32, w.N*nb)
	zs := make([]float32, w.N*nb)
	for n := range w.N {
		for b := range nb {
			s, m := w.k4Block(n, b)
			sc[n*nb+b] = s
			// s*(u-8) - zs*8*Sum = s*u - m*Sum: zs = (m - 8*s)/8
			zs[n*nb+b] = (m - 8*s) / 8
		}
	}
	w.sym = &Q4{N: w.N, K: w.K, Nib: w.Nib, Scales: sc}
	w.zs = zs
}
