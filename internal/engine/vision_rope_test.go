package engine_test

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/plan"
)

// A tiny encoder of what Qwen2-VL's vision plan adds to SmolVLM's: q and
// k turned by a 2-D RoPE (the first half of each head's pairs by the
// row's first position component, the second half by its second), and a
// quick-GELU MLP (x * sigmoid(1.702 x), composed of scale, sigmoid and
// mul), grouped by 4 rows.
const (
	rT, rIn, rD, rH, rF, rG, rOut = 16, 10, 16, 2, 12, 4, 6
	rTheta                        = 10000.0
)

func ropeVisionGraph() (*graph.Graph, []float64) {
	g := graph.New()
	E := rD / rH
	q4 := E / 4
	freq := make([]float64, 2*q4)
	for j := 0; j < q4; j++ {
		freq[j] = 1 / math.Pow(rTheta, float64(2*j)/float64(E/2))
		freq[q4+j] = freq[j]
	}
	rope := graph.Rope{Style: graph.RopeHalf, HeadDim: E, RotDim: E, InvFreq: freq, Sections: []int{q4, q4}}
	x := g.Linear(g.Rows(rIn), "in.w", rD, "in.b")
	q, k := g.RoPE(g.Linear(x, "q.w", rD, ""), rope), g.RoPE(g.Linear(x, "k.w", rD, ""), rope)
	v := g.Linear(x, "v.w", rD, "")
	a := g.Attention(q, k, v, graph.Attn{Heads: rH, KVHeads: rH, HeadDim: E, Scale: float32(1 / math.Sqrt(float64(E))), Bidirectional: true})
	u := g.Linear(a, "up.w", rF, "up.b")
	u = g.Mul(u, g.Sigmoid(g.Scale(u, 1.702)))
	g.SetOutput(g.Linear(g.GroupRows(u, rG), "out.w", rOut, ""))
	return g, freq
}

// refRopeEncoder is ropeVisionGraph in float64, written from the op
// definitions; pos holds each row's (row, col).
func refRopeEncoder(w graph.Weights, freq []float64, rows []float32, pos []int) []float64 {
	lin := func(x []float64, T, K int, wn, bn string, N int) []float64 {
		out := make([]float64, T*N)
		for t := range T {
			for n := range N {
				s := 0.0
				if bn != "" {
					s = float64(w[bn][n])
				}
				for k := range K {
					s += x[t*K+k] * float64(w[wn][n*K+k])
				}
				out[t*N+n] = s
			}
		}
		return out
	}
	E := rD / rH
	rope := func(x []float64) {
		for t := range rT {
			for h := range rH {
				head := x[t*rD+h*E : t*rD+(h+1)*E]
				for i := 0; i < E/2; i++ {
					p := pos[2*t] // the first half of the pairs: the row
					if i >= E/4 {
						p = pos[2*t+1] // the second: the column
					}
					s, c := math.Sincos(float64(p) * freq[i])
					a, b := head[i], head[i+E/2]
					head[i], head[i+E/2] = a*c-b*s, a*s+b*c
				}
			}
		}
	}
	x0 := make([]float64, len(rows))
	for i, v := range rows {
		x0[i] = float64(v)
	}
	x := lin(x0, rT, rIn, "in.w", "in.b", rD)
	q, k, v := lin(x, rT, rD, "q.w", "", rD), lin(x, rT, rD, "k.w", "", rD), lin(x, rT, rD, "v.w", "", rD)
	rope(q)
	rope(k)
	a := make([]float64, rT*rD)
	for hd := range rH {
		for t := range rT {
			sc := make([]float64, rT)
			mx := math.Inf(-1)
			for j := range rT {
				for e := range E {
					sc[j] += q[t*rD+hd*E+e] * k[j*rD+hd*E+e]
				}
				sc[j] /= math.Sqrt(float64(E))
				mx = max(mx, sc[j])
			}
			sum := 0.0
			for j := range sc {
				sc[j] = math.Exp(sc[j] - mx)
				sum += sc[j]
			}
			for j := range rT {
				for e := range E {
					a[t*rD+hd*E+e] += sc[j] / sum * v[j*rD+hd*E+e]
				}
			}
		}
	}
	u := lin(a, rT, rD, "up.w", "up.b", rF)
	for i, z := range u {
		u[i] = z / (1 + math.Exp(-1.702*z))
	}
	return lin(u, rT/rG, rG*rF, "out.w", "", rOut)
}

// TestEncoderRopePositions: a vision plan with a 2-D RoPE and quick-GELU,
// run by the engine with 1 and 3 threads (every step split) at random
// (row, col) positions, equals the float64 reference within 1e-4 (float32
// sums over O(1) values); the text model beside it still takes one
// position component a row; the same rows at positions (0, 0) differ
// from the reference (the positions are read); bad positions are
// refused.
func TestEncoderRopePositions(t *testing.T) {
	m := tinyModel(t)
	tg, err := arch.Build(&m.Config, arch.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vg, freq := ropeVisionGraph()
	w := randomWeights(vg, 7)
	path := filepath.Join(t.TempDir(), "rope.aot")
	in := compile.Input{Graph: tg, Weights: m.Weights, Ctx: 32, ARLens: []int{4},
		Manifest: plan.Manifest{Architecture: "llama", BOS: -1, Vocab: m.Config.Vocab},
		Vision: &compile.VisionInput{Graph: vg, Weights: w, Family: "test", Config: []byte(`{}`),
			Sizes: []compile.VisionSize{{Height: 8, Width: 16, Rows: rT}}}}
	if err := compile.Compile(in, path); err != nil {
		t.Fatal(err)
	}
	e, err := engine.OpenWith(path, engine.Options{Threads: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.PosComponents() != 1 {
		t.Fatalf("the text model takes %d position components, want 1", e.PosComponents())
	}
	r := rand.New(rand.NewPCG(3, 4))
	rows := make([]float32, rT*rIn)
	for i := range rows {
		rows[i] = float32(r.NormFloat64())
	}
	pos := make([]int, 2*rT)
	for i := range pos {
		pos[i] = r.IntN(40)
	}
	ids := make([]int, rT)
	want := refRopeEncoder(w, freq, rows, pos)
	defer engine.SplitEverything()()
	for _, threads := range []int{1, 3} {
		enc, err := e.NewEncoder("vision/8x16", threads)
		if err != nil {
			t.Fatal(err)
		}
		if enc.PosComponents() != 2 {
			t.Fatalf("the encoder takes %d position components, want 2", enc.PosComponents())
		}
		got, err := enc.EncodeAt(rows, ids, pos)
		if err != nil {
			t.Fatal(err)
		}
		var worst float64
		for i := range want {
			worst = max(worst, math.Abs(float64(got[i])-want[i]))
		}
		t.Logf("%d threads: max |diff| %.3g", threads, worst)
		if len(got) != len(want) || worst > 1e-4 {
			t.Fatalf("%d threads: %d values differ from the reference by %.3g", threads, len(got), worst)
		}
		flat, err := enc.EncodeAt(rows, ids, make([]int, 2*rT))
		if err != nil {
			t.Fatal(err)
		}
		var moved float64
		for i := range want {
			moved = max(moved, math.Abs(float64(flat[i])-want[i]))
		}
		if moved < 1e-2 {
			t.Fatalf("positions (0, 0) change the output by only %.3g", moved)
		}
		for _, bad := range []struct {
			pos  []int
			want string
		}{{pos[1:], "rotary position values"}, {append([]int{-1}, pos[1:]...), "out of range"}} {
			if _, err := enc.EncodeAt(rows, ids, bad.pos); err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("bad positions: %v, want %q", err, bad.want)
			}
		}
		enc.Close()
	}
}
