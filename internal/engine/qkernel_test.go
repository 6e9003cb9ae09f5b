package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/quant"
)

func randFloats(r *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (2*r.Float32() - 1) * scale
	}
	return v
}

// qweightOf views a quant.Quantized as the engine's weight.
func qweightOf(q *quant.Quantized) *qweight {
	w := &qweight{N: q.Rows, K: q.Cols, block: q.Scheme.Block, nb: q.BlocksPerRow(),
		q: q.Q, codes: q.Codes, scales: q.Scales, zeros: q.Zeros}
	switch q.Scheme.Kind {
	case quant.KindW8:
		w.kind = plan.LayoutW8
	case quant.KindLPBQ:
		w.kind = plan.LayoutLPBQ
	case quant.KindQ4:
		w.kind = plan.LayoutQ4
	}
	weightBindings[w.kind].bindPlain(w)
	return w
}

var testSchemes = []quant.Scheme{
	{Kind: quant.KindW8},
	{Kind: quant.KindLPBQ, Block: 16},
	{Kind: quant.KindLPBQ, Block: 32, Mode: quant.LPBQReference},
	{Kind: quant.KindQ4, Block: 32, Sym: true},
	{Kind: quant.KindQ4, Block: 16},
}

// linearInOrder is the plain-Go reference of a float32 linear:
// dst[t][j] = Σ_k x[t][k]*w[j][k] (+ b[j]), summed in float32 in k order.
func linearInOrder(dst, x, w, b []float32, T, K, N int) {
	for t := range T {
		for j := range N {
			var s float32
			for k := range K {
				s += w[j*K+k] * x[t*K+k]
			}
			if b != nil {
				s += b[j]
			}
			dst[t*N+j] = s
		}
	}
}

// TestFloatLinear: the float32 linear (the SIMD row kernels) matches the
// in-order reference on random inputs, every column split, with and
// without bias, within 1e-5 of Σ|w*x| + |b| per output (float32 sums in
// another order).
func TestFloatLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, shape := range [][3]int{{1, 1, 1}, {1, 64, 40}, {3, 7, 5}, {5, 172, 9}, {16, 96, 33}, {300, 33, 3}} {
		T, K, N := shape[0], shape[1], shape[2]
		w, x, b := randFloats(r, N*K, 0.5), randFloats(r, T*K, 2), randFloats(r, N, 1)
		for _, bias := range [][]float32{nil, b} {
			want := make([]float32, T*N)
			linearInOrder(want, x, w, bias, T, K, N)
			got := make([]float32, T*N)
			job := linearJob{dst: got, x: x, w: w, b: bias, T: T, K: K, N: N}
			for j := 0; j < N; j += 4 {
				job.run(0, j, min(j+4, N))
			}
			for tt := range T {
				for j := range N {
					var mag float64
					for k := range K {
						mag += math.Abs(float64(w[j*K+k] * x[tt*K+k]))
					}
					if bias != nil {
						mag += math.Abs(float64(bias[j]))
					}
					if d := math.Abs(float64(got[tt*N+j] - want[tt*N+j])); d > 1e-5*mag {
						t.Fatalf("[%d,%d]x%d: dst[%d][%d] = %g, want %g", N, K, T, tt, j, got[tt*N+j], want[tt*N+j])
					}
				}
			}
		}
	}
}

// TestQuantLinearExact checks every quantized linear kernel against the
// in-order float32 reference over the dequantized matrix (quant.Quantized.Dequantize)
// on random weights and inputs, for widths that are and are not block
// multiples, with and without bias, over every column split. The budget is
// zero: both dequantize each weight to the same float32 and sum in the
// same order, so the outputs must be bit-identical.
func TestQuantLinearExact(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, s := range testSchemes {
		for _, shape := range [][3]int{{1, 1, 1}, {3, 7, 5}, {2, 64, 24}, {4, 172, 9}, {1, 96, 33}} {
			T, K, N := shape[0], shape[1], shape[2]
			w := randFloats(r, N*K, 0.5)
			q, err := quant.Quantize(w, N, K, s)
			if err != nil {
				t.Fatal(err)
			}
			deq := q.Dequantize()
			x := randFloats(r, T*K, 2)
			b := randFloats(r, N, 1)
			for _, bias := range [][]float32{nil, b} {
				want := make([]float32, T*N)
				linearInOrder(want, x, deq, bias, T, K, N)
				got := make([]float32, T*N)
				job := linearJob{dst: got, x: x, qw: qweightOf(q), b: bias, T: T, K: K, N: N}
				for j := 0; j < N; j += 4 {
					job.run(0, j, min(j+4, N))
				}
				if !slices.Equal(got, want) {
					t.Fatalf("%v [%d,%d]x%d: quantized kernel differs from the dequantized reference", s, N, K, T)
				}
				if slices.Equal(want, make([]float32, T*N)) {
					t.Fatalf("%v: all-zero output, the test proves nothing", s)
				}
			}
			row := make([]float32, K)
			for n := range N {
				qweightOf(q).row(row, n)
				if !slices.Equal(row, deq[n*K:(n+1)*K]) {
					t.Fatalf("%v: row %d does not dequantize as quant does", s, n)
				}
			}
		}
	}
}

// TestKVQuantizeMatchesQuant checks the cache's byte rule against
// quant.KVQuant bit for bit, per head, including values past the clip,
// NaN and a zero scale.
func TestKVQuantizeMatchesQuant(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const H, D = 3, 8
	kq, err := quant.NewKVQuant(H, D, []float32{1.5, 0, 4})
	if err != nil {
		t.Fatal(err)
	}
	src := randFloats(r, 5*H*D, 6)
	src[1], src[2] = float32(math.NaN()), float32(math.Inf(-1))
	want := make([]uint8, len(src))
	if err := kq.Quantize(want, src); err != nil {
		t.Fatal(err)
	}
	back := make([]float32, len(src))
	if err := kq.Dequantize(back, want); err != nil {
		t.Fatal(err)
	}
	for i, x := range src {
		s := kq.Scales[i/D%H]
		if u := quantizeKV(x, s); u != want[i] {
			t.Fatalf("value %d = %v: stored %d, quant stores %d", i, x, u, want[i])
		}
		if d := dequantizeKV(want[i], s); d != back[i] {
			t.Fatalf("byte %d: reads %v, quant reads %v", want[i], d, back[i])
		}
	}
}

// TestAttentionU8Exact runs attention over a uint8 cache and, as the
// reference, float32 attention over a cache holding the dequantized values
// (new rows quantized and dequantized by quant.KVQuant): the outputs must
// be bit-identical (budget zero, same values summed in the same order).
func TestAttentionU8Exact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const H, G, E, ctx = 4, 2, 8, 24
	C := G * E
	for _, perHead := range []bool{false, true} {
		clip := []float32{2}
		if perHead {
			clip = []float32{1.5, 3}
		}
		kq, _ := quant.NewKVQuant(G, E, clip)
		vq, _ := quant.NewKVQuant(G, E, []float32{2.5, 1}[:len(clip)])
		Ku, Vu := make([]uint8, ctx*C), make([]uint8, ctx*C)
		K, V := make([]float32, ctx*C), make([]float32, ctx*C)
		pos := 0
		for _, T := range []int{5, 1, 3, 1} {
			q, k, v := randFloats(r, T*H*E, 1), randFloats(r, T*C, 3), randFloats(r, T*C, 3)
			kr, vr := roundTrip(t, kq, k), roundTrip(t, vq, v)
			want, got := make([]float32, T*H*E), make([]float32, T*H*E)
			attention(&attnArgs{out: want, q: q, k: kr, v: vr, K: K, V: V, C: C, T: T, pos: pos,
				H: H, G: G, E: E, scale: 0.35})
			attention(&attnArgs{out: got, q: q, k: k, v: v, Ku: Ku, Vu: Vu, ks: kq.Scales, vs: vq.Scales, C: C,
				T: T, pos: pos, H: H, G: G, E: E, scale: 0.35})
			if !slices.Equal(got, want) {
				t.Fatalf("per head %v, pass of %d at %d: uint8 attention differs from the reference", perHead, T, pos)
			}
			pos += T
		}
	}
}

func roundTrip(t *testing.T, kq *quant.KVQuant, x []float32) []float32 {
	u := make([]uint8, len(x))
	out := make([]float32, len(x))
	if err := kq.Quantize(u, x); err != nil {
		t.Fatal(err)
	}
	if err := kq.Dequantize(out, u); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFastAttention: the session's attention (cache stored transposed,
// then the kernel package's dot products and updates over (head, row)
// items split across workers) matches the plain codec loop over a
// row-major float32, binary16 and uint8 cache (one scale per layer, or
// one per key/value head), within 1e-5 relative to the largest output,
// for passes at several positions, with grouped heads and a window.
func TestFastAttention(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const H, G, E, ctx = 6, 2, 40, 64
	C := G * E
	for _, kind := range []string{"f32", "f16", "u8 per layer", "u8 per head"} {
		for _, window := range []int{0, 5} {
			K, V := make([]float32, ctx*C), make([]float32, ctx*C)
			Kh, Vh := make([]uint16, ctx*C), make([]uint16, ctx*C)
			Ku, Vu := make([]uint8, ctx*C), make([]uint8, ctx*C)
			// each key/value head holds stride slots, more than the
			// ctx positions used: the head-major layout's spans hold
			const stride = ctx + 3
			K2, V2 := make([]float32, stride*C), make([]float32, stride*C)
			Kh2, Vh2 := make([]uint16, stride*C), make([]uint16, stride*C)
			Ku2, Vu2 := make([]uint8, stride*C), make([]uint8, stride*C)
			ks, vs := []float32{0.021}, []float32{0.017}
			if kind == "u8 per head" {
				ks, vs = []float32{0.021, 0.013}, []float32{0.017, 0.025}
			}
			pool := newPool(2)
			task := &attnTask{scores: [][]float32{make([]float32, ctx), make([]float32, ctx)}}
			pos := 0
			for _, T := range []int{3, 1, 7, 1, 16} {
				q, k, v := randFloats(r, T*H*E, 1), randFloats(r, T*C, 2), randFloats(r, T*C, 2)
				want, got := make([]float32, T*H*E), make([]float32, T*H*E)
				ref := attnArgs{out: want, q: q, k: k, v: v, C: C, stride: stride, T: T, pos: pos, H: H, G: G, E: E, scale: 0.3,
					window: window}
				fast := ref
				fast.out = got
				switch kind {
				case "f16":
					ref.Kh, ref.Vh, fast.Kh, fast.Vh = Kh, Vh, Kh2, Vh2
					attend(&ref, Kh, Vh, f16Codec{}, f16Codec{})
				case "f32":
					ref.K, ref.V, fast.K, fast.V = K, V, K2, V2
					attend(&ref, K, V, f32Codec{}, f32Codec{})
				default:
					ref.Ku, ref.Vu, fast.Ku, fast.Vu = Ku, Vu, Ku2, Vu2
					ref.ks, ref.vs, fast.ks, fast.vs = ks, vs, ks, vs
					attend(&ref, Ku, Vu, u8Codec{ks}, u8Codec{vs})
				}
				(&storeTask{a: &fast}).run(0, 0, T*G)
				task.a = &fast
				pool.do(task, T*H, 1, true, pool.threads)
				var top float64
				for _, w := range want {
					top = max(top, math.Abs(float64(w)))
				}
				for i := range want {
					if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*top {
						t.Fatalf("%s window %d pass of %d at %d: out[%d] = %g, want %g", kind, window, T, pos, i, got[i], want[i])
					}
				}
				pos += T
			}
			pool.close()
		}
	}
}
