package lora

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/tensor"
)

func TestParseSpec(t *testing.T) {
	for _, c := range []struct {
		in    string
		path  string
		scale float64
	}{
		{"ad", "ad", 1}, {"ad:0.5", "ad", 0.5}, {"a:b/ad", "a:b/ad", 1}, {"ad:-2", "ad", -2},
	} {
		sp, err := ParseSpec(c.in)
		if err != nil || sp.Path != c.path || sp.Scale != c.scale {
			t.Errorf("ParseSpec(%q) = %+v, %v; want %s at %g", c.in, sp, err, c.path, c.scale)
		}
	}
	for _, bad := range []string{"", "ad:NaN", "ad:Inf"} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("ParseSpec(%q) succeeded", bad)
		}
	}
}

// randPair returns a random pair of the given sizes.
func randPair(rng *rand.Rand, rank, in, out int, dora bool) *Pair {
	p := &Pair{Rank: rank, In: in, Out: out, Scale: 0.75,
		A: make([]float32, rank*in), B: make([]float32, out*rank)}
	for i := range p.A {
		p.A[i] = float32(rng.NormFloat64())
	}
	for i := range p.B {
		p.B[i] = float32(rng.NormFloat64())
	}
	if dora {
		p.Magnitude = make([]float32, out)
		for i := range p.Magnitude {
			p.Magnitude[i] = float32(0.5 + rng.Float64())
		}
	}
	return p
}

// TestMergeFormula checks Merge against the formulas written out in
// float64: W + s·B·A, and DoRA's m ⊙ (W + s·B·A) / ‖W + s·B·A‖ by row.
func TestMergeFormula(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dora := range []bool{false, true} {
		p := randPair(rng, 3, 7, 5, dora)
		w := make([]float32, p.Out*p.In)
		for i := range w {
			w[i] = float32(rng.NormFloat64())
		}
		got := append([]float32(nil), w...)
		if err := p.Merge(got, 0.5); err != nil {
			t.Fatal(err)
		}
		s := 0.75 * 0.5
		for o := 0; o < p.Out; o++ {
			row := make([]float64, p.In)
			var norm float64
			for i := range row {
				v := float64(w[o*p.In+i])
				for r := 0; r < p.Rank; r++ {
					v += s * float64(p.B[o*p.Rank+r]) * float64(p.A[r*p.In+i])
				}
				row[i] = v
				norm += v * v
			}
			for i, v := range row {
				if dora {
					v *= float64(p.Magnitude[o]) / math.Sqrt(norm)
				}
				if d := math.Abs(v - float64(got[o*p.In+i])); d > 1e-5 {
					t.Fatalf("dora %v: [%d,%d] = %v, want %v", dora, o, i, got[o*p.In+i], v)
				}
			}
		}
	}
}

// TestPermutedRoundTrip checks that the GGUF row order and back is the
// identity, and that it moves rows.
func TestPermutedRoundTrip(t *testing.T) {
	p := randPair(rand.New(rand.NewPCG(5, 6)), 2, 3, 16, true)
	g, err := p.permuted(2, true)
	if err != nil {
		t.Fatal(err)
	}
	if maxDiff(g.B, p.B) == 0 {
		t.Fatal("the permutation left every row in place")
	}
	// row 1 of head 0 (i=1, j=0) goes to row 2
	if g.B[2*p.Rank] != p.B[1*p.Rank] || g.Magnitude[2] != p.Magnitude[1] {
		t.Error("row 1 did not go to row 2")
	}
	back, err := g.permuted(2, false)
	if err != nil {
		t.Fatal(err)
	}
	if maxDiff(back.B, p.B) != 0 || maxDiff(back.Magnitude, p.Magnitude) != 0 {
		t.Error("permuting there and back changed the pair")
	}
	if _, err := p.permuted(3, true); err == nil {
		t.Error("16 rows split into 3 heads")
	}
}

// writePEFT writes a PEFT folder with config cfg and tensors.
func writePEFT(t *testing.T, cfg map[string]any, ts []safetensors.Tensor) string {
	t.Helper()
	dir := t.TempDir()
	js, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, ConfigName), js, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(filepath.Join(dir, WeightsName), ts, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func peftTensors(mod string, r, in, out int) []safetensors.Tensor {
	return []safetensors.Tensor{
		{Name: "base_model.model." + mod + ".lora_A.weight", DType: tensor.F32, Shape: []int64{int64(r), int64(in)}, Data: make([]float32, r*in)},
		{Name: "base_model.model." + mod + ".lora_B.weight", DType: tensor.F32, Shape: []int64{int64(out), int64(r)}, Data: make([]float32, out*r)},
	}
}

// TestPEFTScales checks alpha/r, rsLoRA's alpha/√r and alpha_pattern.
func TestPEFTScales(t *testing.T) {
	ts := append(peftTensors("model.layers.0.self_attn.q_proj", 4, 8, 8), peftTensors("model.layers.0.mlp.up_proj", 4, 8, 16)...)
	for _, c := range []struct {
		cfg    map[string]any
		q, up  float32
		rsLoRA bool
	}{
		{map[string]any{"peft_type": "LORA", "r": 4, "lora_alpha": 8}, 2, 2, false},
		{map[string]any{"peft_type": "LORA", "r": 4, "lora_alpha": 8, "use_rslora": true}, 4, 4, true},
		{map[string]any{"peft_type": "LORA", "r": 4, "lora_alpha": 8, "alpha_pattern": map[string]any{"up_proj": 16}}, 2, 4, false},
	} {
		a, err := ReadPEFT(writePEFT(t, c.cfg, ts))
		if err != nil {
			t.Fatal(err)
		}
		q, up := a.Pairs["model.layers.0.self_attn.q_proj.weight"], a.Pairs["model.layers.0.mlp.up_proj.weight"]
		if q == nil || up == nil || q.Scale != c.q || up.Scale != c.up || a.RSLoRA != c.rsLoRA {
			t.Errorf("%v: pairs %v, scales %v %v; want %v %v", c.cfg, a.Names(), q, up, c.q, c.up)
		}
	}
}

// TestPEFTRefusals checks that adapters aotlm cannot apply are refused
// with an error naming what is wrong.
func TestPEFTRefusals(t *testing.T) {
	ts := peftTensors("model.layers.0.self_attn.q_proj", 4, 8, 8)
	base := func(k string, v any) map[string]any {
		m := map[string]any{"peft_type": "LORA", "r": 4, "lora_alpha": 8}
		if k != "" {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		cfg  map[string]any
		ts   []safetensors.Tensor
		want string
	}{
		{base("peft_type", "IA3"), ts, "peft_type"},
		{base("r", 0), ts, "rank"},
		{base("fan_in_fan_out", true), ts, "fan_in_fan_out"},
		{base("bias", "all"), ts, "bias"},
		{base("modules_to_save", []string{"lm_head"}), ts, "modules_to_save"},
		{base("use_dora", true), ts, "lora_magnitude_vector"},
		{base("", nil), ts[:1], "lora_B"},
		{base("", nil), append(ts, safetensors.Tensor{Name: "base_model.model.lm_head.weight", DType: tensor.F32, Shape: []int64{2, 2}, Data: make([]float32, 4)}), "not a LoRA matrix"},
	} {
		_, err := ReadPEFT(writePEFT(t, c.cfg, c.ts))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
}

// TestGGUFRoundTrip writes pairs with WriteGGUF and reads them back.
func TestGGUFRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	pairs := map[string]*Pair{"blk.0.attn_q.weight": randPair(rng, 2, 6, 4, false), "blk.1.ffn_up.weight": randPair(rng, 2, 6, 10, false)}
	path := filepath.Join(t.TempDir(), "a.gguf")
	if err := WriteGGUF(path, "llama", 3, pairs, false); err != nil {
		t.Fatal(err)
	}
	a, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if a.Format != "gguf" || a.Arch != "llama" || a.Alpha != 3 || len(a.Pairs) != 2 {
		t.Fatalf("read %+v", a)
	}
	for n, p := range pairs {
		q := a.Pairs[n]
		if q == nil || q.Scale != 1.5 || maxDiff(q.A, p.A) != 0 || maxDiff(q.B, p.B) != 0 {
			t.Errorf("%s: read %+v", n, q)
		}
	}
}
