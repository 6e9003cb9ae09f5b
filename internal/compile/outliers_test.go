package compile_test

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/testutil"
)

func openModel(t *testing.T, rel string) *arch.Model {
	t.Helper()
	ck, err := detect.Open(testutil.Path(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := arch.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// outlierPick chooses a few channels for some linears of m: a shared
// input (q, k, v of layer 0), a lone one (o_proj of the last layer) and
// the FFN's input.
func outlierPick(m *arch.Model) map[string][]int {
	last := m.Config.Layers - 1
	pick := map[string][]int{}
	for name, idx := range map[string][]int{
		"model.layers.0.self_attn.q_proj.weight":                          {3, 17},
		"model.layers.0.self_attn.k_proj.weight":                          {3, 17},
		"model.layers.0.self_attn.v_proj.weight":                          {3, 17},
		"model.layers.1.mlp.gate_proj.weight":                             {0, 40, 63},
		"model.layers.1.mlp.up_proj.weight":                               {5},
		"model.layers." + strconv.Itoa(last) + ".self_attn.o_proj.weight": {1},
	} {
		if _, ok := m.Weights[name]; ok {
			pick[name] = idx
		}
	}
	return pick
}

// interpLogits runs g over ids in the interpreter.
func interpLogits(t *testing.T, g *graph.Graph, w graph.Weights, ids []int) []float32 {
	t.Helper()
	in, err := graph.NewInterpreter(g, w, 2)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := in.Run(in.NewState(len(ids)), ids)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// artifactLogits compiles m (float32 weights, float activations) with the
// outlier split and returns every row's logits.
func artifactLogits(t *testing.T, m *arch.Model, outliers map[string][]int, ids []int) []float32 {
	t.Helper()
	out := filepath.Join(t.TempDir(), "o.aot")
	if err := compile.CompileModel(m, compile.Source{Outliers: outliers}, compile.Options{ARLens: []int{8}, Ctx: 32}, out); err != nil {
		t.Fatal(err)
	}
	am, err := aotlm.Open(out, aotlm.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer am.Close()
	s, err := am.NewSession(32)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Logits(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	var flat []float32
	for _, r := range rows {
		flat = append(flat, r...)
	}
	return flat
}

func maxDiff(a, b []float32) (diff, scale float64) {
	for i := range a {
		scale = max(scale, math.Abs(float64(b[i])))
		diff = max(diff, math.Abs(float64(a[i]-b[i])))
	}
	return diff, scale
}

// TestOutlierSplit checks graph.SplitOutliers and its two column steps:
//   - moved: W's columns at the channels moved into W+".outliers" (and
//     zero in W) is the same function, in the interpreter and through
//     compile (1e-4 of the largest logit);
//   - kept: with W left whole and the ".outliers" weights random, the
//     artifact equals the interpreter of the split graph (1e-4), so the
//     engine's zero_cols and gather_cols compute what the graph's do; and
//     with the ".outliers" weights zero the split graph is W with those
//     columns zeroed (the interpreter's zero_cols is not a no-op).
func TestOutlierSplit(t *testing.T) {
	for _, rel := range []string{"models/stories260K/stories260K.gguf", "arch/gemma"} {
		t.Run(filepath.Base(rel), func(t *testing.T) {
			m := openModel(t, rel)
			ids := []int{1, 5, 9, 2, 7, 3, 8, 4, 6, 10, 11, 3, 12, 14, 15, 2, 9}
			pick := outlierPick(m)
			if len(pick) < 4 {
				t.Fatalf("only %d linears picked: %v", len(pick), pick)
			}
			g, err := arch.Build(&m.Config, arch.BuildOptions{AllLogits: true})
			if err != nil {
				t.Fatal(err)
			}
			sg, err := graph.SplitOutliers(g, pick)
			if err != nil {
				t.Fatal(err)
			}
			want := interpLogits(t, g, m.Weights, ids)

			moved := graph.Weights{}
			for k, v := range m.Weights {
				moved[k] = v
			}
			for name, idx := range pick {
				s := g.Weights[name]
				moved[name], moved[name+graph.OutlierSuffix] = graph.TakeOutliers(m.Weights[name], s[0], s[1], idx)
			}
			if d, s := maxDiff(interpLogits(t, sg, moved, ids), want); d > 1e-5*max(s, 1) {
				t.Fatalf("moved channels, interpreter: logits differ by %g (scale %g)", d, s)
			}
			d, s := maxDiff(artifactLogits(t, &arch.Model{Config: m.Config, Weights: moved}, pick, ids), want)
			t.Logf("moved channels through compile: max |diff| %.3g of %.3g", d, s)
			if d > 1e-4*max(s, 1) {
				t.Fatalf("moved channels, artifact: logits differ by %g (scale %g)", d, s)
			}

			rng := rand.New(rand.NewPCG(5, 6))
			kept, zeroed, orig := graph.Weights{}, graph.Weights{}, graph.Weights{}
			for k, v := range m.Weights {
				kept[k], zeroed[k], orig[k] = v, v, v
			}
			for name, idx := range pick {
				s := g.Weights[name]
				r := make([]float32, s[0]*len(idx))
				for i := range r {
					r[i] = float32(rng.NormFloat64()) * 0.1
				}
				kept[name+graph.OutlierSuffix] = r
				zeroed[name+graph.OutlierSuffix] = make([]float32, len(r))
				orig[name], _ = graph.TakeOutliers(m.Weights[name], s[0], s[1], idx)
			}
			split := interpLogits(t, sg, kept, ids)
			if d, s := maxDiff(split, want); d < 1e-3*max(s, 1) {
				t.Fatalf("random outlier weights changed the logits by only %g: the split is not in effect", d)
			}
			d, s = maxDiff(artifactLogits(t, &arch.Model{Config: m.Config, Weights: kept}, pick, ids), split)
			t.Logf("kept channels, artifact vs split interpreter: max |diff| %.3g of %.3g", d, s)
			if d > 1e-4*max(s, 1) {
				t.Fatalf("artifact vs split interpreter: logits differ by %g (scale %g)", d, s)
			}
			if d, s := maxDiff(interpLogits(t, sg, zeroed, ids), interpLogits(t, g, orig, ids)); d > 1e-5*max(s, 1) {
				t.Fatalf("zero outlier weights: logits differ from W with the columns zeroed by %g", d)
			}
		})
	}
}

// TestOutlierSplitRefuses checks SplitOutliers' errors.
func TestOutlierSplitRefuses(t *testing.T) {
	m := openModel(t, "models/stories260K/stories260K.gguf")
	g, err := arch.Build(&m.Config, arch.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q := "model.layers.0.self_attn.q_proj.weight"
	for _, bad := range []map[string][]int{
		{"no.such.weight": {1}},
		{q: {}},
		{q: {5, 3}},
		{q: {3, 3}},
		{q: {-1}},
		{q: {64}},
		{"model.norm.weight": {1}},
	} {
		if _, err := graph.SplitOutliers(g, bad); err == nil {
			t.Fatalf("%v: split", bad)
		}
	}
}
