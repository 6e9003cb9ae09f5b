package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/tensor"
)

// flashCase is one pass of TestFlashAttention.
type flashCase struct {
	kind           string // "f16" or "u8"
	E, pos, T      int
	window         int
	tree           bool // rows in a random token tree (rowPos and mask)
	headScale, vsc []float32
}

// TestFlashAttention: the tiled attention of a long pass (several blocks
// of flashKeys slots, the online softmax) matches a plain loop over the
// same head-major binary16 or uint8 cache within 1e-5 relative to the
// largest output, on random keys, values and queries: causal passes,
// sliding windows of two or more blocks, token trees (rows
// seeing their ancestors only), head sizes that are and are not a
// multiple of the vector width, a group of 3 query heads a key/value
// head, at 1 and 2 threads.
func TestFlashAttention(t *testing.T) {
	if !kernel.RowsMulti() {
		t.Log("no multi-query row kernels here: the tiled attention is not used; checking the plain reference alone")
	}
	cases := []flashCase{
		{kind: "f16", E: 128, pos: 1100, T: 137},
		{kind: "f16", E: 40, pos: 1300, T: 70, window: 1100},
		{kind: "f16", E: 128, pos: 1400, T: 33, window: 1030},
		{kind: "u8", E: 128, pos: 1030, T: 40, headScale: []float32{0.021, 0.013}, vsc: []float32{0.017, 0.025}},
		{kind: "u8", E: 72, pos: 1200, T: 16, window: 1060, headScale: []float32{0.02}, vsc: []float32{0.03}},
		{kind: "f16", E: 128, pos: 1100, T: 23, tree: true},
		{kind: "u8", E: 42, pos: 1100, T: 24, headScale: []float32{0.02}, vsc: []float32{0.03}},
		{kind: "u8", E: 64, pos: 1500, T: 19, tree: true, window: 1100, headScale: []float32{0.02}, vsc: []float32{0.03}},
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, threads := range []int{1, 2} {
		for _, c := range cases {
			name := fmt.Sprintf("%s E%d pass of %d at %d window %d tree %v threads %d", c.kind, c.E, c.T, c.pos, c.window, c.tree, threads)
			checkFlash(t, name, r, c, threads)
		}
	}
}

func checkFlash(t *testing.T, name string, r *rand.Rand, c flashCase, threads int) {
	t.Helper()
	const H, G = 6, 2
	E, stride := c.E, c.pos+c.T+5
	n := G * stride * E
	a := attnArgs{H: H, G: G, E: E, T: c.T, pos: c.pos, stride: stride, C: G * E, scale: 0.09, window: c.window}
	a.q = randFloats(r, c.T*H*E, 1)
	a.out = make([]float32, c.T*H*E)
	if c.kind == "f16" {
		a.Kh, a.Vh = make([]uint16, n), make([]uint16, n)
		for i := range a.Kh {
			a.Kh[i] = tensor.F32ToF16(float32(r.NormFloat64()) * 2)
			a.Vh[i] = tensor.F32ToF16(float32(r.NormFloat64()))
		}
	} else {
		a.Ku, a.Vu, a.ks, a.vs = make([]uint8, n), make([]uint8, n), c.headScale, c.vsc
		for i := range a.Ku {
			a.Ku[i], a.Vu[i] = uint8(1+r.IntN(255)), uint8(1+r.IntN(255))
		}
	}
	if c.tree {
		parents := make([]int, c.T)
		a.rowPos = make([]int, c.T)
		for i := range parents {
			parents[i] = r.IntN(i+1) - 1
			a.rowPos[i] = c.pos
			if parents[i] >= 0 {
				a.rowPos[i] = a.rowPos[parents[i]] + 1
			}
		}
		m, err := TreeMask(parents)
		if err != nil {
			t.Fatal(err)
		}
		a.mask = m
	}
	if kernel.RowsMulti() && !a.useFlash() {
		t.Fatalf("%s: the pass does not take the tiled attention", name)
	}
	int8s := a.Ku != nil && E%4 == 0 && a.useFlash() // only the tiled path rounds queries to int8
	want := flashReference(&a, int8s)
	exact := want
	if int8s {
		exact = flashReference(&a, false)
	}
	pool := newPool(threads)
	defer pool.close()
	task := &attnTask{a: &a, tiled: a.useFlash(), flash: make([]flashScratch, threads), scores: make([][]float32, threads)}
	for w := range task.scores {
		task.scores[w] = make([]float32, attnTile*stride)
	}
	items := a.flashItems()
	if !task.tiled {
		items = a.T * a.H
	}
	pool.do(task, items, 1, true, threads)
	var top float64
	for _, w := range want {
		top = max(top, math.Abs(float64(w)))
	}
	var worst float64
	for i := range want {
		if d := math.Abs(float64(a.out[i] - want[i])); d > 1e-5*top || math.IsNaN(float64(a.out[i])) {
			t.Fatalf("%s: out[%d] (row %d) = %g, want %g", name, i, i/(H*E), a.out[i], want[i])
		}
		worst = max(worst, math.Abs(float64(a.out[i]-exact[i])))
	}
	if worst > flashInt8Tol*top {
		t.Fatalf("%s: 8-bit scores move an output by %g, above %g of the largest output %g", name, worst, flashInt8Tol, top)
	}
	if int8s {
		t.Logf("%s: 8-bit scores move the outputs by up to %.3g of the largest", name, worst/top)
	}
}

// flashInt8Tol bounds how far the 8-bit scores of a uint8 cache (the
// queries rounded to int8) move an output from the one of float32
// queries, relative to the largest output.
const flashInt8Tol = 0.01

// flashReference is attention over a's head-major cache in plain loops:
// row t at position p sees committed slot q < pos unless a window hides
// it (q <= p - window), and pass row j (slot pos+j, j <= t) when the
// mask allows it (every earlier row without one) and the window does not
// hide its position; softmax in float64. With int8s each query is first
// rounded to int8 with the scale of its largest magnitude over 127, as
// the 8-bit scores of a uint8 cache take it.
func flashReference(a *attnArgs, int8s bool) []float32 {
	E, H, grp := a.E, a.H, a.H/a.G
	out := make([]float32, a.T*H*E)
	key := func(g, q, e int) float64 {
		i := (g*a.stride+q)*E + e
		if a.Kh != nil {
			return float64(tensor.F16ToF32(a.Kh[i]))
		}
		return float64(int(a.Ku[i])-kernel.U8Bias) * float64(headScale(a.ks, g))
	}
	val := func(g, q, e int) float64 {
		i := (g*a.stride+q)*E + e
		if a.Vh != nil {
			return float64(tensor.F16ToF32(a.Vh[i]))
		}
		return float64(int(a.Vu[i])-kernel.U8Bias) * float64(headScale(a.vs, g))
	}
	posOf := func(j int) int {
		if a.rowPos != nil {
			return a.rowPos[j]
		}
		return a.pos + j
	}
	for t := range a.T {
		p := posOf(t)
		seen := func(q int) bool {
			if q < a.pos {
				return a.window == 0 || q > p-a.window
			}
			j := q - a.pos
			if j > t || (a.mask != nil && !a.mask.Allowed(t, j)) {
				return false
			}
			return a.window == 0 || posOf(j) > p-a.window
		}
		for h := range H {
			g := h / grp
			q := a.q[t*H*E+h*E : t*H*E+h*E+E]
			if int8s {
				q = roundQuery(q)
			}
			sc := make([]float64, a.pos+t+1)
			mx := math.Inf(-1)
			for s := range sc {
				if !seen(s) {
					continue
				}
				var d float64
				for e := range E {
					d += float64(q[e]) * key(g, s, e)
				}
				sc[s] = d * float64(a.scale)
				mx = max(mx, sc[s])
			}
			var sum float64
			acc := make([]float64, E)
			for s := range sc {
				if !seen(s) {
					continue
				}
				w := math.Exp(sc[s] - mx)
				sum += w
				for e := range E {
					acc[e] += w * val(g, s, e)
				}
			}
			for e := range E {
				out[t*H*E+h*E+e] = float32(acc[e] / sum)
			}
		}
	}
	return out
}

// roundQuery returns x rounded to 127ths of its largest magnitude.
func roundQuery(x []float32) []float32 {
	var m float64
	for _, v := range x {
		m = max(m, math.Abs(float64(v)))
	}
	out := make([]float32, len(x))
	if m == 0 {
		return out
	}
	inv := 127 / float32(m)
	for i, v := range x {
		out[i] = float32(math.Round(float64(v*inv))) * (float32(m) / 127)
	}
	return out
}

// TestTransposeRows: transposeRows moves every element to its place for
// row counts with and without a tail of the four-row loop.
func TestTransposeRows(t *testing.T) {
	for _, rows := range []int{1, 3, 4, 9} {
		const cols, ld = 5, 11
		src := make([]uint16, rows*cols)
		for i := range src {
			src[i] = uint16(i + 1)
		}
		dst := make([]uint16, cols*ld)
		transposeRows(dst, ld, src, rows, cols)
		for r := range rows {
			for c := range cols {
				if got := dst[c*ld+r]; got != src[r*cols+c] {
					t.Fatalf("rows %d: dst[%d][%d] = %d, want %d", rows, c, r, got, src[r*cols+c])
				}
			}
		}
	}
}

// BenchmarkPrefillAttention times one attention step of a pass of 128
// rows over a binary16 and a uint8 cache of the Qwen3-0.6B shape (16
// query heads, 8 key/value heads of 128) at depth 3968, through the
// per-row path ("rows") and the tiled one ("tiled"), on one thread.
func BenchmarkPrefillAttention(b *testing.B) {
	const H, G, E, T, pos = 16, 8, 128, 128, 3968
	for _, kind := range []string{"f16", "u8"} {
		r := rand.New(rand.NewPCG(1, 2))
		stride := pos + T
		n := G * stride * E
		a := attnArgs{H: H, G: G, E: E, T: T, pos: pos, stride: stride, C: G * E, scale: 0.09}
		a.q, a.out = randFloats(r, T*H*E, 1), make([]float32, T*H*E)
		if kind == "f16" {
			a.Kh, a.Vh = make([]uint16, n), make([]uint16, n)
			for i := range a.Kh {
				a.Kh[i] = tensor.F32ToF16(float32(r.NormFloat64()))
				a.Vh[i] = tensor.F32ToF16(float32(r.NormFloat64()))
			}
		} else {
			a.Ku, a.Vu, a.ks, a.vs = make([]uint8, n), make([]uint8, n), []float32{0.02}, []float32{0.02}
			for i := range a.Ku {
				a.Ku[i], a.Vu[i] = uint8(r.IntN(256)), uint8(r.IntN(256))
			}
		}
		task := &attnTask{a: &a, flash: make([]flashScratch, 1), scores: [][]float32{make([]float32, attnTile*stride)}}
		b.Run(kind+"/rows", func(b *testing.B) {
			for b.Loop() {
				task.run(0, 0, T*H)
			}
		})
		b.Run(kind+"/tiled", func(b *testing.B) {
			task.tiled = true
			for b.Loop() {
				task.run(0, 0, a.flashItems())
			}
			task.tiled = false
		})
	}
}
