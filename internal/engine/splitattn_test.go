package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/tensor"
)

// splitCase is one decode row of TestSplitAttention.
type splitCase struct {
	kind    string // "f16" or "u8"
	H, G, E int
	pos     int
	window  int
	ks, vs  []float32
}

// TestSplitAttention: the split attention of a decode row (chunks of
// splitKeys slots merged in order) matches a plain float64 loop over the
// same head-major binary16 or uint8 cache within 1e-5 relative to the
// largest output and the per-row path (attendItems) within 1e-5 too, on
// random keys, values and queries; and its outputs are the same bits at
// 1, 2 and 3 threads (the path is taken for layers of at most
// splitMaxGroups key/value heads; the others are checked through it
// too). Depths whose last chunk is full, one slot and
// partial, a sliding window, groups of 2, 3 and 5 query heads (a tile
// of 4 and one of 1), head sizes that are and are not a multiple of the
// vector width.
func TestSplitAttention(t *testing.T) {
	if !kernel.RowsMulti() {
		t.Log("no multi-query row kernels here: the split attention is not used")
		a := attnArgs{T: 1, pos: 4000, Kh: []uint16{0}}
		if a.useSplit() {
			t.Fatal("the split attention is chosen without the multi-query row kernels")
		}
		return
	}
	cases := []splitCase{
		{kind: "f16", H: 16, G: 8, E: 128, pos: 3967},
		{kind: "f16", H: 6, G: 2, E: 40, pos: 1024},
		{kind: "f16", H: 10, G: 2, E: 64, pos: 1700, window: 1300},
		{kind: "u8", H: 16, G: 8, E: 128, pos: 2100, ks: []float32{0.02}, vs: []float32{0.03}},
		{kind: "u8", H: 6, G: 2, E: 72, pos: 1535, ks: []float32{0.021, 0.013}, vs: []float32{0.017, 0.025}},
	}
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range cases {
		checkSplit(t, r, c)
	}
}

func checkSplit(t *testing.T, r *rand.Rand, c splitCase) {
	t.Helper()
	H, G, E := c.H, c.G, c.E
	stride := c.pos + 9
	n := G * stride * E
	name := fmt.Sprintf("%s H%d G%d E%d at %d window %d", c.kind, H, G, E, c.pos, c.window)
	a := attnArgs{H: H, G: G, E: E, T: 1, pos: c.pos, stride: stride, C: G * E, scale: 0.09, window: c.window}
	a.q = randFloats(r, H*E, 1)
	if c.kind == "f16" {
		a.Kh, a.Vh = make([]uint16, n), make([]uint16, n)
		for i := range a.Kh {
			a.Kh[i] = tensor.F32ToF16(float32(r.NormFloat64()) * 2)
			a.Vh[i] = tensor.F32ToF16(float32(r.NormFloat64()))
		}
	} else {
		a.Ku, a.Vu, a.ks, a.vs = make([]uint8, n), make([]uint8, n), c.ks, c.vs
		for i := range a.Ku {
			a.Ku[i], a.Vu[i] = uint8(1+r.IntN(255)), uint8(1+r.IntN(255))
		}
	}
	if a.useSplit() != (G <= splitMaxGroups) {
		t.Fatalf("%s: useSplit %v with %d key/value heads", name, a.useSplit(), G)
	}
	want := flashReference(&a, false)
	var top float64
	for _, w := range want {
		top = max(top, math.Abs(float64(w)))
	}
	// the per-row path
	a.out = make([]float32, H*E)
	attendItems(&a, 0, H, make([]float32, attnTile*stride))
	old := a.out
	var first []float32
	for _, threads := range []int{1, 2, 3} {
		a.out = make([]float32, H*E)
		pool := newPool(threads)
		task := &attnTask{a: &a, split: true}
		nc := a.splitChunks()
		task.parts.grow(H, nc, E, threads)
		pool.do(task, G*nc, 1, true, threads)
		mergeSplit(&a, &task.parts)
		pool.close()
		for i := range want {
			if d := math.Abs(float64(a.out[i] - want[i])); !(d <= 1e-5*top) {
				t.Fatalf("%s, %d threads: out[%d] = %g, want %g (reference)", name, threads, i, a.out[i], want[i])
			}
			if d := math.Abs(float64(a.out[i] - old[i])); !(d <= 1e-5*top) {
				t.Fatalf("%s, %d threads: out[%d] = %g, the per-row path %g", name, threads, i, a.out[i], old[i])
			}
		}
		if first == nil {
			first = a.out
			continue
		}
		for i := range first {
			if math.Float32bits(a.out[i]) != math.Float32bits(first[i]) {
				t.Fatalf("%s: out[%d] = %g at %d threads, %g at 1: not the same bits", name, i, a.out[i], threads, first[i])
			}
		}
	}
}

// BenchmarkDecodeAttention times one decode row's attention over the
// binary16 caches of 8 layers of the Qwen3-0.6B shape (16 query heads,
// 8 key/value heads of 128), layer after layer so that each reads its
// cache from memory as a decode step does, through the split attention
// and the per-row path, at 2 threads.
func BenchmarkDecodeAttention(b *testing.B) {
	if !kernel.RowsMulti() {
		b.Skip("no multi-query row kernels here: the split attention is not used")
	}
	const H, G, E, layers, threads = 16, 8, 128, 8, 2
	r := rand.New(rand.NewPCG(1, 2))
	for _, depth := range []int{512, 1024, 2048, 3968} {
		stride := depth + 1
		caches := make([]attnArgs, layers)
		for l := range caches {
			n := G * stride * E
			a := attnArgs{H: H, G: G, E: E, T: 1, pos: depth, stride: stride, C: G * E, scale: 0.09}
			a.q, a.out = randFloats(r, H*E, 1), make([]float32, H*E)
			a.Kh, a.Vh = make([]uint16, n), make([]uint16, n)
			for i := range a.Kh {
				a.Kh[i] = tensor.F32ToF16(float32(r.NormFloat64()))
				a.Vh[i] = tensor.F32ToF16(float32(r.NormFloat64()))
			}
			caches[l] = a
		}
		for _, split := range []bool{false, true} {
			b.Run(fmt.Sprintf("depth=%d/split=%v", depth, split), func(b *testing.B) {
				pool := newPool(threads)
				defer pool.close()
				task := &attnTask{scores: make([][]float32, threads)}
				for w := range task.scores {
					task.scores[w] = make([]float32, attnTile*stride)
				}
				for b.Loop() {
					for l := range caches {
						a := &caches[l]
						task.a = a
						if split {
							nc := a.splitChunks()
							task.parts.grow(H, nc, E, threads)
							task.split = true
							pool.do(task, G*nc, 1, true, threads)
							task.split = false
							mergeSplit(a, &task.parts)
						} else {
							pool.doParts(task, H, 1, true, threads, attnParts(1, H, G, threads))
						}
					}
				}
			})
		}
	}
}
