package engine_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/plan"
)

// A tiny encoder of every vision op: T rows of In floats, a patch linear
// with bias plus position embeddings, one pre-norm block of
// bidirectional attention and a GELU MLP, a final norm, group_rows by G
// and a bias-free projection to Out.
const (
	vT, vIn, vD, vH, vF, vG, vOut = 8, 12, 16, 2, 24, 2, 20
	vEps                          = 1e-5
)

func tinyVisionGraph() *graph.Graph {
	g := graph.New()
	pos := g.Tokens()
	x := g.Linear(g.Rows(vIn), "patch.w", vD, "patch.b")
	x = g.Add(x, g.Embed(pos, "pos", vT, vD))
	h := g.LayerNorm(x, "ln1.w", "ln1.b", vEps)
	q := g.Linear(h, "q.w", vD, "q.b")
	k := g.Linear(h, "k.w", vD, "k.b")
	v := g.Linear(h, "v.w", vD, "v.b")
	E := vD / vH
	a := g.Attention(q, k, v, graph.Attn{Heads: vH, KVHeads: vH, HeadDim: E, Scale: float32(1 / math.Sqrt(float64(E))), Bidirectional: true})
	x = g.Add(x, g.Linear(a, "o.w", vD, "o.b"))
	h = g.LayerNorm(x, "ln2.w", "ln2.b", vEps)
	x = g.Add(x, g.Linear(g.GELUTanh(g.Linear(h, "up.w", vF, "up.b")), "down.w", vD, "down.b"))
	x = g.LayerNorm(x, "post.w", "post.b", vEps)
	g.SetOutput(g.Linear(g.GroupRows(x, vG), "proj.w", vOut, ""))
	return g
}

func randomWeights(g *graph.Graph, seed uint64) graph.Weights {
	r := rand.New(rand.NewPCG(seed, 1))
	w := graph.Weights{}
	for name, shape := range g.Weights {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * 0.5)
		}
		w[name] = v
	}
	return w
}

// compileWithVision compiles the tiny text model with the tiny encoder.
func compileWithVision(t *testing.T) (string, graph.Weights) {
	t.Helper()
	m := tinyModel(t)
	tg, err := arch.Build(&m.Config, arch.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vg := tinyVisionGraph()
	vw := randomWeights(vg, 5)
	path := filepath.Join(t.TempDir(), "vision.aot")
	in := compile.Input{Graph: tg, Weights: m.Weights, Ctx: 32, ARLens: []int{4},
		Manifest: plan.Manifest{Architecture: "llama", BOS: -1, Vocab: m.Config.Vocab},
		Vision: &compile.VisionInput{Graph: vg, Weights: vw, Family: "test", Config: []byte(`{}`),
			Sizes: []compile.VisionSize{{Height: 4, Width: 8, Rows: vT}}}}
	if err := compile.Compile(in, path); err != nil {
		t.Fatal(err)
	}
	return path, vw
}

// refEncoder is the tiny encoder in float64, written from the op
// definitions.
func refEncoder(w graph.Weights, rows []float32, ids []int) []float64 {
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
	norm := func(x []float64, wn, bn string) []float64 {
		out := make([]float64, len(x))
		for t := 0; t < len(x)/vD; t++ {
			row := x[t*vD : (t+1)*vD]
			m, v := 0.0, 0.0
			for _, a := range row {
				m += a
			}
			m /= vD
			for _, a := range row {
				v += (a - m) * (a - m)
			}
			inv := 1 / math.Sqrt(v/vD+vEps)
			for c, a := range row {
				out[t*vD+c] = (a-m)*inv*float64(w[wn][c]) + float64(w[bn][c])
			}
		}
		return out
	}
	add := func(a, b []float64) []float64 {
		out := make([]float64, len(a))
		for i := range a {
			out[i] = a[i] + b[i]
		}
		return out
	}
	x0 := make([]float64, len(rows))
	for i, v := range rows {
		x0[i] = float64(v)
	}
	x := lin(x0, vT, vIn, "patch.w", "patch.b", vD)
	for t, id := range ids {
		for c := range vD {
			x[t*vD+c] += float64(w["pos"][id*vD+c])
		}
	}
	h := norm(x, "ln1.w", "ln1.b")
	q, k, v := lin(h, vT, vD, "q.w", "q.b", vD), lin(h, vT, vD, "k.w", "k.b", vD), lin(h, vT, vD, "v.w", "v.b", vD)
	E := vD / vH
	a := make([]float64, vT*vD)
	for hd := range vH {
		for t := range vT {
			sc := make([]float64, vT)
			mx := math.Inf(-1)
			for j := range vT {
				for e := range E {
					sc[j] += q[t*vD+hd*E+e] * k[j*vD+hd*E+e]
				}
				sc[j] /= math.Sqrt(float64(E))
				mx = max(mx, sc[j])
			}
			sum := 0.0
			for j := range sc {
				sc[j] = math.Exp(sc[j] - mx)
				sum += sc[j]
			}
			for j := range vT {
				for e := range E {
					a[t*vD+hd*E+e] += sc[j] / sum * v[j*vD+hd*E+e]
				}
			}
		}
	}
	x = add(x, lin(a, vT, vD, "o.w", "o.b", vD))
	u := lin(norm(x, "ln2.w", "ln2.b"), vT, vD, "up.w", "up.b", vF)
	for i, z := range u {
		u[i] = 0.5 * z * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(z+0.044715*z*z*z)))
	}
	x = add(x, lin(u, vT, vF, "down.w", "down.b", vD))
	x = norm(x, "post.w", "post.b")
	// group_rows: G consecutive rows of D are one row of G*D, the same floats
	return lin(x, vT/vG, vG*vD, "proj.w", "", vOut)
}

// TestEncoderMatchesReference: a vision plan of every encoder op (rows
// input, linear with bias, position embedding add, layer_norm,
// bidirectional attention, GELU tanh, group_rows) run by the engine with
// 1 and 3 threads (every step split across the workers) equals the float64 reference within 1e-4 (float32
// sums in the kernels' order over O(1) values).
func TestEncoderMatchesReference(t *testing.T) {
	path, w := compileWithVision(t)
	e, err := engine.OpenWith(path, engine.Options{Threads: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := e.VisionPlans(); len(got) != 1 || got[0].Name != "vision/4x8" {
		t.Fatalf("vision plans %+v", got)
	}
	r := rand.New(rand.NewPCG(9, 9))
	rows := make([]float32, vT*vIn)
	for i := range rows {
		rows[i] = float32(r.NormFloat64())
	}
	ids := r.Perm(vT)
	want := refEncoder(w, rows, ids)
	// every step split across the workers, however small
	defer engine.SplitEverything()()
	for _, threads := range []int{1, 3} {
		enc, err := e.NewEncoder("vision/4x8", threads)
		if err != nil {
			t.Fatal(err)
		}
		if or, oc := enc.Output(); enc.Rows() != vT || enc.InputCols() != vIn || or != vT/vG || oc != vOut {
			t.Fatalf("encoder shape %d x %d -> %d x %d", enc.Rows(), enc.InputCols(), or, oc)
		}
		got, err := enc.Encode(rows, ids)
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
		for _, bad := range []struct {
			rows []float32
			ids  []int
			want string
		}{
			{rows[:len(rows)-1], ids, "input values"},
			{rows, ids[1:], "ids for a vision plan"},
			{rows, append([]int{vT}, ids[1:]...), "position table"},
		} {
			if _, err := enc.Encode(bad.rows, bad.ids); err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("bad input: %v, want %q", err, bad.want)
			}
		}
		enc.Close()
	}
	if _, err := e.NewEncoder("vision/8x8", 1); err == nil || !strings.Contains(err.Error(), "no vision plan") {
		t.Fatalf("unknown plan: %v", err)
	}
}

// TestBadVisionPlanRefused: a vision plan that is truncated, cut short,
// causal (with a cache), grouped by a size that does not divide, missing, listed under a wrong name or refers to a missing
// weight is refused at open, naming it; a flipped byte in it is refused by
// its section's checksum.
func TestBadVisionPlanRefused(t *testing.T) {
	const blob = "plan/vision/4x8"
	cases := []struct {
		name, want string
		edit       func(t *testing.T, p *parts)
	}{
		{"truncated", blob, func(t *testing.T, p *parts) { p.blobs[blob] = p.blobs[blob][:len(p.blobs[blob])/2] }},
		{"last step cut", blob, func(t *testing.T, p *parts) {
			p.editPlan(t, blob, func(pl *plan.Plan) { pl.Steps = pl.Steps[:len(pl.Steps)-1] })
		}},
		{"causal attention", "cache layers", func(t *testing.T, p *parts) {
			p.editPlan(t, blob, func(pl *plan.Plan) {
				for i := range pl.Steps {
					if pl.Steps[i].Attn != nil {
						pl.Steps[i].Attn.Bidirectional = false
					}
				}
				pl.KV = plan.KV{Layers: 1, Cols: vD, Ctx: 1}
			})
		}},
		{"group does not divide", "group", func(t *testing.T, p *parts) {
			p.editPlan(t, blob, func(pl *plan.Plan) {
				for i := range pl.Steps {
					if pl.Steps[i].Group > 0 {
						pl.Steps[i].Group = 3
					}
				}
			})
		}},
		{"missing blob", "plan/vision/9x9", func(t *testing.T, p *parts) {
			vis := p.manifest["vision"].(map[string]any)
			vis["plans"].([]any)[0].(map[string]any)["blob"] = "plan/vision/9x9"
		}},
		{"wrong name", "manifest.vision.plans[0].name", func(t *testing.T, p *parts) {
			vis := p.manifest["vision"].(map[string]any)
			vis["plans"].([]any)[0].(map[string]any)["name"] = "vision/4x4"
		}},
		{"tokens disagree", "manifest says 5 tokens", func(t *testing.T, p *parts) {
			vis := p.manifest["vision"].(map[string]any)
			vis["plans"].([]any)[0].(map[string]any)["tokens"] = 5
		}},
		{"missing weight", "proj.w", func(t *testing.T, p *parts) {
			for i, ti := range p.tensors {
				if ti.Name == "proj.w" {
					p.tensors = append(p.tensors[:i], p.tensors[i+1:]...)
					break
				}
			}
		}},
	}
	path, _ := compileWithVision(t)
	t.Run("flipped byte", func(t *testing.T) {
		a, err := artifact.Open(path, artifact.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		secs := a.Sections()
		a.Close()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range secs {
			if s.Name == blob {
				b[s.Offset+s.Size/2] ^= 0x20
				found = true
			}
		}
		if !found {
			t.Fatalf("no section %s", blob)
		}
		bad := filepath.Join(t.TempDir(), "bad.aot")
		if err := os.WriteFile(bad, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = engine.Open(bad)
		var fe *artifact.FormatError
		if !errors.As(err, &fe) || fe.Section != blob {
			t.Fatalf("byte flipped in %s: got %v", blob, err)
		}
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := takeApart(t, path)
			c.edit(t, p)
			e, err := engine.Open(p.write(t, t.TempDir()))
			if err == nil {
				e.Close()
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
}
