package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// randQ6 returns a random 6-bit weight: every code 0..63, sub-scales
// of both signs up to ±127 (and -128), super-block scales that differ.
func randQ6(r *rand.Rand, N, K int) (*Q6, []uint8) {
	u := make([]uint8, N*K)
	for i := range u {
		u[i] = uint8(r.IntN(64))
	}
	w := &Q6{N: N, K: K, Nib: make([]byte, N*K/2), Hi: make([]byte, N*K/4), Sub: make([]int8, N*K/Q6Group), D: make([]float32, N*K/Q6Super)}
	if err := PackQ6(w.Nib, w.Hi, u, N, K); err != nil {
		panic(err)
	}
	for i := range w.Sub {
		w.Sub[i] = int8(r.IntN(256) - 128)
	}
	for i := range w.D {
		w.D[i] = (0.5 + r.Float32()) * 1e-4
	}
	return w, u
}

// TestQ6Pack: every code comes back from the planes, and Row is the
// documented formula.
func TestQ6Pack(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	const N, K = 3, 3 * Q6Super
	w, u := randQ6(r, N, K)
	if err := w.Check(); err != nil {
		t.Fatal(err)
	}
	row := make([]float32, K)
	for n := range N {
		w.Row(row, n)
		for k := range K {
			i := n*K + k
			if c := w.code(n, k); c != int32(u[i]) {
				t.Fatalf("code [%d][%d] = %d, packed %d", n, k, c, u[i])
			}
			want := float32(w.D[i/Q6Super]*float32(w.Sub[i/Q6Group])) * float32(int32(u[i])-32)
			if row[k] != want {
				t.Fatalf("row %d [%d] = %g, want %g", n, k, row[k], want)
			}
		}
	}
	u[5] = 64
	if err := PackQ6(w.Nib, w.Hi, u, N, K); err == nil {
		t.Fatal("a code of 64 packed")
	}
	if err := PackQ6(w.Nib, w.Hi, u[:K*N-1], N, K); err == nil {
		t.Fatal("a short code slice packed")
	}
	bad := *w
	bad.D = bad.D[1:]
	if err := bad.Check(); err == nil {
		t.Fatal("Check took a short D")
	}
	bad = *w
	bad.K = 300
	if err := bad.Check(); err == nil {
		t.Fatal("Check took K = 300")
	}
}

// TestQ6MatMulMeaning: the generic product against float64 sums of the
// dequantized rows and activations, within 1e-5 of Σ|terms|.
func TestQ6MatMulMeaning(t *testing.T) {
	r := rand.New(rand.NewPCG(63, 64))
	const N, K, T = 9, 2 * Q6Super, 3
	w, _ := randQ6(r, N, K)
	x, _ := randQ8(r, T, K)
	dst := make([]float32, T*N)
	q6MatMulGeneric(dst, N, w, x, 0, N)
	row := make([]float32, K)
	for n := range N {
		w.Row(row, n)
		for tt := range T {
			var want, mag float64
			for k := range K {
				v := float64(row[k]) * float64(x.Q[tt*K+k]) * float64(x.D[tt*(K/QK)+k/QK])
				want += v
				mag += math.Abs(v)
			}
			if d := math.Abs(float64(dst[tt*N+n]) - want); d > 1e-5*mag+1e-9 {
				t.Errorf("[%d][%d] = %g, want %g (|diff| %g, Σ|terms| %g)", tt, n, dst[tt*N+n], want, d, mag)
			}
		}
	}
}

// TestOverlaysQ6MatMul: every supported overlay's 6-bit product against
// the generic one on random weights, row ranges that start anywhere,
// K from one super-block to past the stack records (8192), with guard
// values around the output.
func TestOverlaysQ6MatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(65, 66))
	// 400 rows of 512 span several row blocks of a few tokens
	// (q6BlockBytes)
	shapes := [][2]int{{1, Q6Super}, {3, 2 * Q6Super}, {7, 3 * Q6Super}, {16, 4 * Q6Super}, {5, 9 * Q6Super}, {2, 40 * Q6Super}, {400, 2 * Q6Super}}
	tested := 0
	for _, o := range supported(t) {
		if o.Q6MatMul == nil {
			continue
		}
		tested++
		for _, sh := range shapes {
			N, K := sh[0], sh[1]
			for _, T := range []int{1, 2, 3, 5, 8} {
				w, _ := randQ6(r, N, K)
				x, xf := randQ8(r, T, K)
				n0 := r.IntN(N)
				n1 := n0 + 1 + r.IntN(N-n0)
				if T == 2 {
					n0, n1 = 0, N
				}
				rowAbs := func(n int) []float32 {
					v := make([]float32, K)
					w.Row(v, n)
					for i := range v {
						v[i] = abs32(v[i])
					}
					return v
				}
				checkMatMul(t, fmt.Sprintf("%s q6", o.Name), N, K, T, n0, n1, rowAbs, x, xf,
					func(d []float32, l int, x *Q8, a, b int) { q6MatMulGeneric(d, l, w, x, a, b) },
					func(d []float32, l int, x *Q8, a, b int) { o.Q6MatMul(d, l, w, x, a, b) })
			}
		}
	}
	t.Logf("%d overlays with a 6-bit product tested", tested)
}

// TestQ6MatMulBatchExact: a token's outputs have the same bits alone
// and among others, with the implementation in use.
func TestQ6MatMulBatchExact(t *testing.T) {
	r := rand.New(rand.NewPCG(67, 68))
	// 11 rows: one block; 500 rows of 1024: several (q6BlockBytes)
	for _, sh := range [][3]int{{11, 4 * Q6Super, 4}, {500, 4 * Q6Super, 8}} {
		q6BatchExact(t, r, sh[0], sh[1], sh[2])
	}
}

func q6BatchExact(t *testing.T, r *rand.Rand, N, K, T int) {
	w, _ := randQ6(r, N, K)
	x, _ := randQ8(r, T, K)
	all := make([]float32, T*N)
	w.MatMul(all, N, x, 0, N)
	for tt := range T {
		one := NewQ8(1, K)
		copy(one.Q, x.Q[tt*K:(tt+1)*K])
		copy(one.D, x.D[tt*K/QK:(tt+1)*K/QK])
		copy(one.Sum, x.Sum[tt*K/QK:(tt+1)*K/QK])
		got := make([]float32, N)
		w.MatMul(got, N, one, 0, N)
		for n := range N {
			if got[n] != all[tt*N+n] {
				t.Fatalf("N %d K %d: token %d row %d: %g alone, %g among %d tokens", N, K, tt, n, got[n], all[tt*N+n], T)
			}
		}
	}
}

// BenchmarkQ6MatMulT1 times one token over Qwen3-0.6B's classifier
// shape (a 6-bit weight of 129 MB, streamed from memory) and one in
// cache, per implementation; bytes are the weight's.
func BenchmarkQ6MatMulT1(b *testing.B) {
	r := rand.New(rand.NewPCG(69, 70))
	for _, sh := range [][2]int{{1024, 1024}, {151936, 1024}} {
		N, K := sh[0], sh[1]
		w, _ := randQ6(r, N, K)
		x, _ := randQ8(r, 1, K)
		dst := make([]float32, N)
		bytes := int64(len(w.Nib) + len(w.Hi) + len(w.Sub) + 4*len(w.D))
		impls := []struct {
			name string
			f    func(dst []float32, ldd int, w *Q6, x *Q8, n0, n1 int)
		}{{"generic", q6MatMulGeneric}}
		for _, o := range Overlays() {
			if o.Supported && o.Q6MatMul != nil {
				impls = append(impls, struct {
					name string
					f    func(dst []float32, ldd int, w *Q6, x *Q8, n0, n1 int)
				}{o.Name, o.Q6MatMul})
			}
		}
		for _, im := range impls {
			if im.name == "generic" && N*K > 1<<22 {
				continue
			}
			b.Run(fmt.Sprintf("%dx%d/%s", N, K, im.name), func(b *testing.B) {
				b.SetBytes(bytes)
				for b.Loop() {
					im.f(dst, N, w, x, 0, N)
				}
			})
			if N*K > 1<<26 && im.name != "generic" {
				b.Run(fmt.Sprintf("%dx%d/%s/threads=2", N, K, im.name), func(b *testing.B) {
					b.SetBytes(bytes)
					for b.Loop() {
						inHalves(N, func(n0, n1 int) { im.f(dst, N, w, x, n0, n1) })
					}
				})
			}
		}
	}
}

// TestQ6MatMulAllocs: a one-token product allocates nothing once warm.
func TestQ6MatMulAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	w, _ := randQ6(r, 8, 2*Q6Super)
	x, _ := randQ8(r, 1, 2*Q6Super)
	dst := make([]float32, 8)
	w.MatMul(dst, 8, x, 0, 8)
	if a := testing.AllocsPerRun(20, func() { w.MatMul(dst, 8, x, 0, 8) }); a > 0 {
		t.Errorf("%.1f allocations per product", a)
	}
}
