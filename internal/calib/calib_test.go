package calib

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/testutil"
)

func load(t *testing.T, rel string) *arch.Model {
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

func logits(t *testing.T, m *arch.Model, ids []int) []float32 {
	t.Helper()
	g, err := arch.Build(&m.Config, arch.BuildOptions{AllLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	in, err := graph.NewInterpreter(g, m.Weights, 2)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := in.Run(in.NewState(len(ids)), ids)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func samples() [][]int {
	return [][]int{{1, 5, 9, 2, 7, 3, 8, 4, 6, 10}, {1, 11, 3, 12, 14, 15, 2, 9, 30, 40, 41}}
}

// TestCollect checks the statistics against the inputs seen directly
// through an interpreter hook: rows, mean and max |x| per channel, and
// X^T X of one input.
func TestCollect(t *testing.T) {
	m := load(t, "models/stories260K/stories260K.gguf")
	st, err := Collect(m, samples(), Options{Hessian: true})
	if err != nil {
		t.Fatal(err)
	}
	in := st.ByWeight["model.layers.1.self_attn.q_proj.weight"]
	if in == nil || len(in.Weights) != 3 {
		t.Fatalf("q_proj's input: %+v", in)
	}
	// recompute directly
	g, _ := arch.Build(&m.Config, arch.BuildOptions{AllLogits: true})
	ip, _ := graph.NewInterpreter(g, m.Weights, 1)
	k := in.Cols
	sum, mx, h := make([]float64, k), make([]float64, k), make([]float64, k*k)
	rows := 0
	ip.SetInputHook(func(n *graph.Node, slot int, x []float32, r, cols int) []float32 {
		if n.Op == op.Linear && n.Weight == "model.layers.1.self_attn.q_proj.weight" {
			rows += r
			for i, v := range x {
				a := math.Abs(float64(v))
				sum[i%k] += a
				mx[i%k] = max(mx[i%k], a)
			}
			for q := range r {
				for a := range k {
					for b := range k {
						h[a*k+b] += float64(x[q*k+a]) * float64(x[q*k+b])
					}
				}
			}
		}
		return nil
	})
	for _, s := range samples() {
		if _, _, err := ip.Run(ip.NewState(len(s)), s); err != nil {
			t.Fatal(err)
		}
	}
	if rows != in.Rows || rows != 21 {
		t.Fatalf("rows %d, direct %d (want 21)", in.Rows, rows)
	}
	mean := in.MeanAbs()
	for j := range k {
		if math.Abs(mean[j]-sum[j]/21) > 1e-9 || in.MaxAbs[j] != mx[j] {
			t.Fatalf("channel %d: mean %v max %v, direct %v %v", j, mean[j], in.MaxAbs[j], sum[j]/21, mx[j])
		}
	}
	checkGram(t, in.H, h, k)
	if len(in.Sample) == 0 || len(in.Sample)%k != 0 {
		t.Fatalf("sample of %d values", len(in.Sample))
	}
}

// TestScaleKeepsModel checks that smoothing and AWQ scales, folded into
// the norms and up projections, leave the float model's logits unchanged
// (within 1e-4 of the largest), and that the statistics follow: the scaled
// model's freshly collected max |x| equals the updated ones.
func TestScaleKeepsModel(t *testing.T) {
	for _, rel := range []string{"models/stories260K/stories260K.gguf", "arch/gemma", "arch/qwen2"} {
		m := load(t, rel)
		ids := []int{1, 5, 9, 2, 7, 3, 8, 4}
		want := logits(t, m, ids)
		st, err := Collect(m, samples(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		schemeOf := func(string) quant.Scheme { return quant.Scheme{Kind: quant.KindQ4, Block: 32, Sym: true} }
		reps, err := Scale(m, st, schemeOf, Methods{SmoothAlpha: 0.5, AWQ: true, AWQGrid: 5})
		if err != nil {
			t.Fatal(err)
		}
		folded := 0
		for _, r := range reps {
			if r.Into != "" {
				folded++
			}
		}
		if folded == 0 {
			t.Fatalf("%s: nothing folded: %+v", rel, reps)
		}
		got := logits(t, m, ids)
		var scale, diff float64
		for i := range want {
			scale = max(scale, math.Abs(float64(want[i])))
			diff = max(diff, math.Abs(float64(got[i]-want[i])))
		}
		t.Logf("%s: %d of %d inputs scaled; max |logit diff| %.3g of %.3g", rel, folded, len(reps), diff, scale)
		if diff > 1e-4*max(scale, 1) {
			t.Fatalf("%s: scaled model's logits differ by %g", rel, diff)
		}
		again, err := Collect(m, samples(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i, in := range st.Inputs {
			for j, v := range in.MaxAbs {
				w := again.Inputs[i].MaxAbs[j]
				if math.Abs(v-w) > 1e-4*(1+w) {
					t.Fatalf("%s: input %v channel %d: updated max %v, recollected %v", rel, in.Weights, j, v, w)
				}
			}
		}
	}
}

// TestSequential checks the sequential recollection: with a quantizer that
// changes nothing it reproduces Collect's statistics exactly; with one that
// rounds the weights, the first input (the embedding's norm) keeps its
// statistics while later inputs move, and every weight is quantized once.
func TestSequential(t *testing.T) {
	m := load(t, "models/stories260K/stories260K.gguf")
	st, err := Collect(m, samples(), Options{Hessian: true})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Collect(m, samples(), Options{Hessian: true})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	ident := func(name string, w []float32, in *Input) ([]float32, error) {
		seen[name]++
		return w, nil
	}
	if err := Sequential(m, st, samples(), Options{Hessian: true}, ident); err != nil {
		t.Fatal(err)
	}
	for i, in := range st.Inputs {
		r := ref.Inputs[i]
		for j := range in.H {
			if in.H[j] != r.H[j] {
				t.Fatalf("input %v: H[%d] %v, Collect %v", in.Weights, j, in.H[j], r.H[j])
			}
		}
		if in.Rows != r.Rows || in.Min != r.Min || in.Max != r.Max {
			t.Fatalf("input %v: rows/range differ", in.Weights)
		}
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("%s quantized %d times", name, n)
		}
	}
	if len(seen) != len(st.ByWeight) {
		t.Errorf("%d weights quantized, %d linears", len(seen), len(st.ByWeight))
	}
	st2, _ := Collect(m, samples(), Options{})
	round := func(name string, w []float32, in *Input) ([]float32, error) {
		q, err := quant.Quantize(w, len(w)/in.Cols, in.Cols, quant.Scheme{Kind: quant.KindQ4, Block: 32, Sym: true})
		if err != nil {
			return nil, err
		}
		return q.Dequantize(), nil
	}
	before := []float64{st2.Inputs[0].MaxAbs[0], st2.Inputs[len(st2.Inputs)-1].MaxAbs[0]}
	if err := Sequential(m, st2, samples(), Options{}, round); err != nil {
		t.Fatal(err)
	}
	if st2.Inputs[0].MaxAbs[0] != before[0] || st2.Inputs[len(st2.Inputs)-1].MaxAbs[0] == before[1] {
		t.Errorf("first input %v -> %v (want unchanged), last %v -> %v (want moved)", before[0], st2.Inputs[0].MaxAbs[0], before[1], st2.Inputs[len(st2.Inputs)-1].MaxAbs[0])
	}
}

// checkGram compares a Gram matrix summed in float32 within each pass
// against the float64 one: each entry within 1e-5 of the Cauchy-Schwarz
// bound sqrt(H[a,a] H[b,b]) of its terms' sum of magnitudes (float32
// sums of up to a few hundred terms are good to about 1e-6 of it), and
// exactly symmetric.
func checkGram(t *testing.T, got, want []float64, k int) {
	t.Helper()
	for a := range k {
		for b := range k {
			bound := math.Sqrt(want[a*k+a] * want[b*k+b])
			if d := math.Abs(got[a*k+b] - want[a*k+b]); d > 1e-5*bound+1e-30 {
				t.Fatalf("H[%d,%d] = %v, direct %v (bound %v)", a, b, got[a*k+b], want[a*k+b], bound)
			}
			if got[a*k+b] != got[b*k+a] {
				t.Fatalf("H[%d,%d] = %v but H[%d,%d] = %v", a, b, got[a*k+b], b, a, got[b*k+a])
			}
		}
	}
}

// TestAddGram checks the SIMD Gram update against a float64 double loop
// on random rows, over several calls (accumulation) and worker counts,
// for widths that are and are not multiples of the kernel's lanes.
func TestAddGram(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, k := range []int{1, 7, 64, 130, 257} {
		for _, threads := range []int{1, 2, 5} {
			h, want := make([]float64, k*k), make([]float64, k*k)
			for call, rows := range []int{1, 33, 200} {
				x := make([]float32, rows*k)
				for i := range x {
					x[i] = float32(rng.NormFloat64()) * float32(1+call)
				}
				addGram(h, x, rows, k, threads)
				for r := range rows {
					for a := range k {
						for b := range k {
							want[a*k+b] += float64(x[r*k+a]) * float64(x[r*k+b])
						}
					}
				}
			}
			checkGram(t, h, want, k)
		}
	}
}

// TestOutlierChannels checks the pick: only channels past ratio x median,
// the largest first, at most ceil(fraction*K), returned ascending.
func TestOutlierChannels(t *testing.T) {
	m := []float64{1, 1, 20, 1, 9, 1, 1, 100, 1, 1}
	cases := []struct {
		frac, ratio float64
		want        []int
	}{
		{0, 0, nil},
		{0.1, 0, []int{7}},        // one channel: the largest
		{0.3, 0, []int{2, 4, 7}},  // three, all >= 8x the median 1
		{0.3, 10, []int{2, 7}},    // 9 is under 10x
		{0.5, 0, []int{2, 4, 7}},  // no more qualify
		{0.01, 200, nil},          // none is 200x
		{0.25, 0, []int{2, 4, 7}}, // ceil(2.5) = 3
		{0.15, 8, []int{2, 7}},    // ceil(1.5) = 2
	}
	for _, c := range cases {
		got := OutlierChannels(m, c.frac, c.ratio)
		if len(got) != len(c.want) {
			t.Fatalf("fraction %v ratio %v: %v, want %v", c.frac, c.ratio, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("fraction %v ratio %v: %v, want %v", c.frac, c.ratio, got, c.want)
			}
		}
	}
	if got := OutlierChannels([]float64{0, 0, 0}, 0.5, 1); got != nil {
		t.Fatalf("all-zero channels: %v", got)
	}
}
