package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/tensor"
)

// q4Case fills a 4-bit cache of P positions with keys (rotated when rotK
// is set) and values through the store path (storeRows) and returns the
// pass of its last T rows.
func q4Case(H, G, E, P, T int, k, v []float32, rotK bool) attnArgs {
	R := kernel.KVQ4RowBytes(E)
	stride := P + 3
	a := attnArgs{H: H, G: G, E: E, T: P, stride: stride, C: G * E, scale: float32(1 / math.Sqrt(float64(E))),
		k: k, v: v, Kq: make([]uint8, G*stride*R), Vq: make([]uint8, G*stride*R), rotK: rotK}
	storeRows(&a, 0, P*G)
	a.T, a.pos, a.k, a.v = T, P-T, nil, nil
	return a
}

// attentionRef is the float64 causal attention of the last T of P rows
// (queries q, [T][H][E]) over keys and values key(g, s) and val(g, s).
func attentionRef(H, G, E, P, T int, scale float64, q []float32, key, val func(g, s int) []float64) []float64 {
	out := make([]float64, T*H*E)
	for t := range T {
		last := P - T + t
		for h := range H {
			g := h / (H / G)
			qh := q[(t*H+h)*E : (t*H+h+1)*E]
			sc := make([]float64, last+1)
			mx := math.Inf(-1)
			for s := range sc {
				ks := key(g, s)
				var d float64
				for e := range E {
					d += float64(qh[e]) * ks[e]
				}
				sc[s] = d * scale
				mx = max(mx, sc[s])
			}
			var sum float64
			o := out[(t*H+h)*E : (t*H+h+1)*E]
			for s := range sc {
				w := math.Exp(sc[s] - mx)
				sum += w
				vs := val(g, s)
				for e := range E {
					o[e] += w * vs[e]
				}
			}
			for e := range o {
				o[e] /= sum
			}
		}
	}
	return out
}

// q4Row reads row s of head g of a 4-bit cache back, rotated back when
// it was rotated, in float64.
func q4Row(c []uint8, stride, E, g, s int, rotated bool) []float64 {
	R := kernel.KVQ4RowBytes(E)
	x := make([]float32, E)
	at := (g*stride + s) * R
	kernel.DequantizeKVQ4(x, c[at:at+R])
	if rotated {
		kernel.RotateHead(x)
	}
	out := make([]float64, E)
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// TestQ4AttentionExact: the attention of rows over a 4-bit cache
// (attendItems, a prefill pass of 5 rows and a decode row) matches a
// float64 loop over the values the cache's rows stand for (read back and
// rotated back) within 1e-5 relative to the largest output: the rotated
// queries give the scores of the unrotated keys, and the output is
// rotated back. Head dimensions 8, 32 and 128, groups of 1, 3 and 4
// query heads, with the keys rotated (q4) and not (q4v).
func TestQ4AttentionExact(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct {
		H, G, E, P, T int
		rotK          bool
	}{
		{8, 4, 8, 70, 5, true}, {6, 2, 32, 300, 5, true}, {4, 4, 128, 90, 1, true}, {8, 2, 32, 200, 1, true},
		{6, 2, 32, 300, 5, false}, {8, 2, 64, 200, 1, false},
	} {
		name := fmt.Sprintf("H%d G%d E%d P%d T%d rotK %v", c.H, c.G, c.E, c.P, c.T, c.rotK)
		k, v := randFloats(r, c.P*c.G*c.E, 2), randFloats(r, c.P*c.G*c.E, 1)
		a := q4Case(c.H, c.G, c.E, c.P, c.T, k, v, c.rotK)
		a.q = randFloats(r, c.T*c.H*c.E, 1)
		a.out = make([]float32, c.T*c.H*c.E)
		attendItems(&a, 0, c.T*c.H, make([]float32, attnTile*a.stride))
		want := attentionRef(c.H, c.G, c.E, c.P, c.T, float64(a.scale), a.q,
			func(g, s int) []float64 { return q4Row(a.Kq, a.stride, c.E, g, s, c.rotK) },
			func(g, s int) []float64 { return q4Row(a.Vq, a.stride, c.E, g, s, true) })
		var top float64
		for _, w := range want {
			top = max(top, math.Abs(w))
		}
		for i, w := range want {
			if d := math.Abs(float64(a.out[i]) - w); !(d <= 1e-5*top) {
				t.Fatalf("%s: out[%d] = %g, want %g", name, i, a.out[i], w)
			}
		}
	}
}

// TestQ4AttentionError: on a 4096-token sequence of random weights
// (hidden rows h ~ N(0, 1) of 128, keys, values and queries h·W with W
// ~ N(0, 1/128), the queries scaled so that a row's logits spread over a
// few units), the attention output of the last rows over the 4-bit cache
// is within 20% of the exact float64 attention over the float32 keys and
// values (relative RMS over all outputs; 15.1% measured with the keys
// rotated, 15.9% without: a 4-bit value's
// rounding error alone is about a tenth of its spread, and the output
// of random values is an average of the same spread), and the binary16
// cache's error is below it. The measured errors are logged.
func TestQ4AttentionError(t *testing.T) {
	const P, T, H, G, E, D = 4096, 4, 8, 2, 64, 128
	r := rand.New(rand.NewPCG(21, 22))
	proj := func(n int, gain float32) ([]float32, func(h []float32) []float32) {
		w := make([]float32, D*n)
		for i := range w {
			w[i] = float32(r.NormFloat64()) * gain / float32(math.Sqrt(D))
		}
		return w, func(h []float32) []float32 {
			out := make([]float32, n)
			for j := range n {
				var s float32
				for i, x := range h {
					s += x * w[i*n+j]
				}
				out[j] = s
			}
			return out
		}
	}
	_, pk := proj(G*E, 1)
	_, pv := proj(G*E, 1)
	_, pq := proj(H*E, 3)
	k, v := make([]float32, 0, P*G*E), make([]float32, 0, P*G*E)
	var q []float32
	for p := range P {
		h := randKV(r, D)
		k, v = append(k, pk(h)...), append(v, pv(h)...)
		if p >= P-T {
			q = append(q, pq(h)...)
		}
	}
	want := attentionRef(H, G, E, P, T, 1/math.Sqrt(E), q,
		func(g, s int) []float64 { return f64(k[(s*G+g)*E : (s*G+g+1)*E]) },
		func(g, s int) []float64 { return f64(v[(s*G+g)*E : (s*G+g+1)*E]) })

	a := q4Case(H, G, E, P, T, k, v, true)
	a.q, a.out = q, make([]float32, T*H*E)
	attendItems(&a, 0, T*H, make([]float32, attnTile*a.stride))
	q4 := relRMS(a.out, want)
	a = q4Case(H, G, E, P, T, k, v, false)
	a.q, a.out = q, make([]float32, T*H*E)
	attendItems(&a, 0, T*H, make([]float32, attnTile*a.stride))
	q4v := relRMS(a.out, want)

	stride := P + 3
	h := attnArgs{H: H, G: G, E: E, T: T, pos: P - T, stride: stride, C: G * E, scale: a.scale, q: q,
		Kh: make([]uint16, G*stride*E), Vh: make([]uint16, G*stride*E), out: make([]float32, T*H*E)}
	for s := range P {
		for g := range G {
			for e := range E {
				h.Kh[(g*stride+s)*E+e] = tensor.F32ToF16(k[(s*G+g)*E+e])
				h.Vh[(g*stride+s)*E+e] = tensor.F32ToF16(v[(s*G+g)*E+e])
			}
		}
	}
	attendItems(&h, 0, T*H, make([]float32, attnTile*stride))
	f16 := relRMS(h.out, want)
	t.Logf("relative RMS error of the attention output at 4096 positions: 4-bit %.4f (keys unrotated: %.4f), binary16 %.6f", q4, q4v, f16)
	if !(q4 <= 0.2) || !(q4v <= 0.2) {
		t.Fatalf("4-bit cache: relative RMS error %.4f, %.4f with keys unrotated, of the attention output (binary16: %.6f), want at most 0.2", q4, q4v, f16)
	}
	if !(f16 < q4) {
		t.Fatalf("the binary16 cache's error %.6f is not below the 4-bit cache's %.4f", f16, q4)
	}
}

// randKV returns n normal values.
func randKV(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// f64 widens x.
func f64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// relRMS is the RMS of got-want over the RMS of want.
func relRMS(got []float32, want []float64) float64 {
	var d, n float64
	for i, w := range want {
		e := float64(got[i]) - w
		d += e * e
		n += w * w
	}
	return math.Sqrt(d / n)
}

// q4Shifted returns x (rows of G*E values) with the centers mu ([G*E])
// added to every row.
func q4Shifted(x, mu []float32) []float32 {
	out := make([]float32, len(x))
	for i := range x {
		out[i] = x[i] + mu[i%len(mu)]
	}
	return out
}

// TestQ4CenteredAttentionExact: with centers (kmu, vmu) the attention
// over a 4-bit cache matches a float64 loop over the values the cache's
// rows stand for plus the centers, within 1e-5 relative to the largest
// output: the centers are subtracted before the rotation and the value
// center added back after the weighted sum. Keys rotated and not.
func TestQ4CenteredAttentionExact(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, c := range []struct {
		H, G, E, P, T int
		rotK          bool
	}{
		{6, 2, 32, 120, 5, true}, {8, 2, 64, 90, 1, true}, {6, 2, 32, 120, 5, false}, {8, 4, 8, 40, 1, false},
	} {
		name := fmt.Sprintf("H%d G%d E%d P%d T%d rotK %v", c.H, c.G, c.E, c.P, c.T, c.rotK)
		kmu, vmu := randFloats(r, c.G*c.E, 3), randFloats(r, c.G*c.E, 3)
		k := q4Shifted(randFloats(r, c.P*c.G*c.E, 2), kmu)
		v := q4Shifted(randFloats(r, c.P*c.G*c.E, 1), vmu)
		a := q4CaseCentered(c.H, c.G, c.E, c.P, c.T, k, v, kmu, vmu, c.rotK)
		a.q = randFloats(r, c.T*c.H*c.E, 1)
		a.out = make([]float32, c.T*c.H*c.E)
		attendItems(&a, 0, c.T*c.H, make([]float32, attnTile*a.stride))
		plus := func(x []float64, mu []float32, g int) []float64 {
			for e := range x {
				x[e] += float64(mu[g*c.E+e])
			}
			return x
		}
		want := attentionRef(c.H, c.G, c.E, c.P, c.T, float64(a.scale), a.q,
			func(g, s int) []float64 { return plus(q4Row(a.Kq, a.stride, c.E, g, s, c.rotK), kmu, g) },
			func(g, s int) []float64 { return plus(q4Row(a.Vq, a.stride, c.E, g, s, true), vmu, g) })
		var top float64
		for _, w := range want {
			top = max(top, math.Abs(w))
		}
		for i, w := range want {
			if d := math.Abs(float64(a.out[i]) - w); !(d <= 1e-5*top) {
				t.Fatalf("%s: out[%d] = %g, want %g", name, i, a.out[i], w)
			}
		}
	}
}

// q4CaseCentered is q4Case with the centers kmu and vmu.
func q4CaseCentered(H, G, E, P, T int, k, v, kmu, vmu []float32, rotK bool) attnArgs {
	R := kernel.KVQ4RowBytes(E)
	stride := P + 3
	a := attnArgs{H: H, G: G, E: E, T: P, stride: stride, C: G * E, scale: float32(1 / math.Sqrt(float64(E))),
		k: k, v: v, Kq: make([]uint8, G*stride*R), Vq: make([]uint8, G*stride*R), rotK: rotK, kmu: kmu, vmu: vmu}
	storeRows(&a, 0, P*G)
	a.T, a.pos, a.k, a.v = T, P-T, nil, nil
	return a
}

// TestCenteringKeepsAttention: over float32 keys and values, attention
// over the keys less a constant vector and the values less another, with
// the latter added back to the output, equals the plain attention within
// 1e-5 relative to the largest output (float64 sums): the shift moves all
// of a query's scores alike and the weights sum to 1.
func TestCenteringKeepsAttention(t *testing.T) {
	const H, G, E, P, T = 8, 2, 32, 200, 3
	r := rand.New(rand.NewPCG(41, 42))
	kmu, vmu := randFloats(r, G*E, 4), randFloats(r, G*E, 4)
	k := q4Shifted(randFloats(r, P*G*E, 2), kmu)
	v := q4Shifted(randFloats(r, P*G*E, 1), vmu)
	q := randFloats(r, T*H*E, 1)
	scale := 1 / math.Sqrt(E)
	row := func(x []float32, mu []float32, g, s int) []float64 {
		out := f64(x[(s*G+g)*E : (s*G+g+1)*E])
		if mu != nil {
			for e := range out {
				out[e] -= float64(mu[g*E+e])
			}
		}
		return out
	}
	plain := attentionRef(H, G, E, P, T, scale, q,
		func(g, s int) []float64 { return row(k, nil, g, s) },
		func(g, s int) []float64 { return row(v, nil, g, s) })
	centered := attentionRef(H, G, E, P, T, scale, q,
		func(g, s int) []float64 { return row(k, kmu, g, s) },
		func(g, s int) []float64 { return row(v, vmu, g, s) })
	var top float64
	for _, w := range plain {
		top = max(top, math.Abs(w))
	}
	for i := range plain {
		g := (i / E % H) / (H / G)
		got := centered[i] + float64(vmu[g*E+i%E])
		if d := math.Abs(got - plain[i]); !(d <= 1e-5*top) {
			t.Fatalf("out[%d]: centered %g, plain %g", i, got, plain[i])
		}
	}
}

// TestQ4CenteringError: keys and values with a large per-channel offset
// (as trained models have): the 4-bit cache's attention output is closer
// to the exact float64 attention with the offsets as centers than
// without, by at least a factor of 2 (both errors logged).
func TestQ4CenteringError(t *testing.T) {
	const H, G, E, P, T = 8, 2, 32, 600, 4
	r := rand.New(rand.NewPCG(51, 52))
	kmu, vmu := randFloats(r, G*E, 6), randFloats(r, G*E, 6)
	k := q4Shifted(randKV(r, P*G*E), kmu)
	v := q4Shifted(randKV(r, P*G*E), vmu)
	q := randKV(r, T*H*E)
	want := attentionRef(H, G, E, P, T, 1/math.Sqrt(E), q,
		func(g, s int) []float64 { return f64(k[(s*G+g)*E : (s*G+g+1)*E]) },
		func(g, s int) []float64 { return f64(v[(s*G+g)*E : (s*G+g+1)*E]) })
	for _, rotK := range []bool{true, false} {
		var errs [2]float64
		for i, mu := range [][2][]float32{{nil, nil}, {kmu, vmu}} {
			a := q4CaseCentered(H, G, E, P, T, k, v, mu[0], mu[1], rotK)
			a.q, a.out = q, make([]float32, T*H*E)
			attendItems(&a, 0, T*H, make([]float32, attnTile*a.stride))
			errs[i] = relRMS(a.out, want)
		}
		t.Logf("keys rotated %v: relative RMS error %.4f uncentered, %.4f centered", rotK, errs[0], errs[1])
		if !(errs[1]*2 <= errs[0]) {
			t.Errorf("keys rotated %v: centered error %.4f is not at most half the uncentered %.4f", rotK, errs[1], errs[0])
		}
	}
}
