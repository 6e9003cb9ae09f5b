package qmodel_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/decoding"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/model"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

func preset(t *testing.T, name string) quant.Recipe {
	t.Helper()
	r, err := quant.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRoundTrip quantizes a random tiny model with every preset and checks
// that loading the folder gives, for every tensor, exactly what
// quant.Quantize + Dequantize gives for the scheme the manifest records, and
// the source value for tensors kept in float.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	cfg := tinymodel.Config{HiddenSize: 64, IntermediateSize: 96, NumLayers: 2, NumHeads: 4, NumKVHeads: 2, VocabSize: 80, MaxPositions: 32}
	if err := tinymodel.WriteLlama(src, cfg, 5); err != nil {
		t.Fatal(err)
	}
	ck, err := detect.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := arch.Load(ck)
	ck.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range quant.PresetNames() {
		out := filepath.Join(dir, name)
		rep, err := qmodel.Quantize(src, out, qmodel.Options{Recipe: preset(t, name)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m, man, err := qmodel.Load(out)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(m.Weights) != len(orig.Weights) || len(rep.Tensors) != len(orig.Weights) {
			t.Fatalf("%s: %d tensors, want %d", name, len(m.Weights), len(orig.Weights))
		}
		quantized := 0
		for tn, w := range orig.Weights {
			e := man.Tensors[tn]
			want := w
			if !e.Float {
				quantized++
				q, err := quant.Quantize(w, e.Shape[0], e.Shape[1], e.Scheme.Quant())
				if err != nil {
					t.Fatal(err)
				}
				want = q.Dequantize()
			}
			if !slices.Equal(m.Weights[tn], want) {
				t.Fatalf("%s: tensor %s does not round-trip", name, tn)
			}
		}
		if quantized == 0 {
			t.Fatalf("%s: nothing was quantized", name)
		}
		if m.Config.Hidden != 64 || m.Config.Vocab != 80 {
			t.Fatalf("%s: config %+v", name, m.Config)
		}
	}
}

// TestStoriesW8Greedy checks the quantized path end to end on the real
// model: the w8a16 folder of stories260K reproduces llama2.c's greedy ids
// for at least the first 32 tokens of every reference case.
func TestStoriesW8Greedy(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	ref := testutil.StoriesGreedy(t)
	out := filepath.Join(t.TempDir(), "w8")
	if _, err := qmodel.Quantize(src, out, qmodel.Options{Recipe: preset(t, "w8a16")}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Open(out, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Tokenizer == nil || m.Tokenizer.VocabSize() != 512 {
		t.Fatal("the GGUF's tokenizer did not come along")
	}
	for _, c := range ref.Cases {
		s, _ := m.NewSession(0)
		res, err := decoding.Generate(s, c.PromptIDs, decoding.Options{MaxTokens: 32})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.IDs, c.IDs[:32]) {
			t.Errorf("prompt %v: w8 greedy %v, llama2.c %v", c.PromptIDs, res.IDs, c.IDs[:32])
		}
	}
}

// TestIndivisibleWidth quantizes stories260K's 172-wide down projections
// with LPBQ blocks of 32: padded by default, W8 with FallbackW8, and the
// report says which.
func TestIndivisibleWidth(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	r, err := quant.ParseRecipe([]byte(`{"name": "all-lpbq", "default": {"scheme": "lpbq", "block": 32}}`))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, fb := range []bool{false, true} {
		out := filepath.Join(dir, map[bool]string{false: "pad", true: "w8"}[fb])
		rep, err := qmodel.Quantize(src, out, qmodel.Options{Recipe: r, FallbackW8: fb})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, tr := range rep.Tensors {
			if !strings.Contains(tr.Name, "down_proj") {
				continue
			}
			n++
			if !fb && (!tr.Padded || !strings.HasPrefix(tr.Scheme, "lpbq")) {
				t.Errorf("%s: %+v, want padded lpbq", tr.Name, tr)
			}
			if fb && (tr.Padded || tr.Scheme != "w8" || tr.Fallback == "") {
				t.Errorf("%s: %+v, want a w8 fallback", tr.Name, tr)
			}
		}
		if n != 5 {
			t.Fatalf("%d down projections reported", n)
		}
		if _, _, err := qmodel.Load(out); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRefusals(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	dir := t.TempDir()
	out := filepath.Join(dir, "q")
	if _, err := qmodel.Quantize(src, out, qmodel.Options{Recipe: preset(t, "w8a16")}); err != nil {
		t.Fatal(err)
	}
	if _, err := qmodel.Quantize(src, out, qmodel.Options{Recipe: preset(t, "w8a16")}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("overwrote an existing folder: %v", err)
	}
	// a failed run leaves nothing behind
	bad := filepath.Join(dir, "bad")
	if _, err := qmodel.Quantize(src, bad, qmodel.Options{Recipe: preset(t, "w8a16"), Tokenizer: filepath.Join(dir, "none.model")}); err == nil {
		t.Fatal("missing tokenizer accepted")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
	// a corrupted manifest and a truncated part are refused with the field named
	man := filepath.Join(out, qmodel.ManifestName)
	b, _ := os.ReadFile(man)
	os.WriteFile(man, []byte(strings.Replace(string(b), `"format_version": 1`, `"format_version": 9`, 1)), 0o644)
	if _, _, err := qmodel.Load(out); err == nil || !strings.Contains(err.Error(), "format version 9") {
		t.Fatalf("future version: %v", err)
	}
	var m qmodel.Manifest
	json.Unmarshal(b, &m)
	e := m.Tensors["model.layers.0.mlp.up_proj.weight"]
	e.Shape = []int{172, 65}
	m.Tensors["model.layers.0.mlp.up_proj.weight"] = e
	nb, _ := json.Marshal(m)
	os.WriteFile(man, nb, 0o644)
	if _, _, err := qmodel.Load(out); err == nil || !strings.Contains(err.Error(), "up_proj") {
		t.Fatalf("shape mismatch: %v", err)
	}
}

// TestOutlierChannels quantizes a tiny model with outlier channels for
// two linears and checks the folder: the manifest lists them, the float
// tensor W.outliers holds W's original columns exactly, the quantized W
// is W with those columns zeroed, quantized; Load puts the columns back
// (the function the split computes); the report counts them in the bits.
func TestOutlierChannels(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	cfg := tinymodel.Config{HiddenSize: 64, IntermediateSize: 96, NumLayers: 2, NumHeads: 4, NumKVHeads: 2, VocabSize: 80, MaxPositions: 32}
	if err := tinymodel.WriteLlama(src, cfg, 5); err != nil {
		t.Fatal(err)
	}
	ck, err := detect.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := arch.Load(ck)
	ck.Close()
	if err != nil {
		t.Fatal(err)
	}
	pick := map[string][]int{
		"model.layers.0.self_attn.q_proj.weight": {2, 33},
		"model.layers.1.mlp.up_proj.weight":      {63},
	}
	prepare := func(m *arch.Model) (*qmodel.Prepared, error) { return &qmodel.Prepared{Outliers: pick}, nil }
	out := filepath.Join(dir, "q")
	rep, err := qmodel.Quantize(src, out, qmodel.Options{Recipe: preset(t, "w4a16-lpbq"), Prepare: prepare})
	if err != nil {
		t.Fatal(err)
	}
	f, err := qmodel.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, _, err := qmodel.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	for name, idx := range pick {
		if !slices.Equal(f.Manifest.Outliers[name], idx) {
			t.Fatalf("%s: manifest outliers %v, want %v", name, f.Manifest.Outliers[name], idx)
		}
		e := f.Manifest.Tensors[name]
		rows, cols := e.Shape[0], e.Shape[1]
		w := orig.Weights[name]
		kept, err := f.Float(name + graph.OutlierSuffix)
		if err != nil {
			t.Fatal(err)
		}
		main, cut := graph.TakeOutliers(w, rows, cols, idx)
		if !slices.Equal(kept, cut) {
			t.Fatalf("%s: the float columns are not the original ones", name)
		}
		q, err := quant.Quantize(main, rows, cols, e.Scheme.Quant())
		if err != nil {
			t.Fatal(err)
		}
		want := q.Dequantize()
		graph.PutOutliers(want, rows, cols, idx, cut)
		if !slices.Equal(m.Weights[name], want) {
			t.Fatalf("%s: Load does not give the quantized rest with the float columns put back", name)
		}
		if _, ok := m.Weights[name+graph.OutlierSuffix]; ok {
			t.Fatalf("%s: Load keeps the split weight", name)
		}
		for _, tr := range rep.Tensors {
			if tr.Name == name && (tr.Outliers != len(idx) || tr.Bits < 4+32*float64(len(idx))/float64(cols)) {
				t.Fatalf("%s: report %+v", name, tr)
			}
		}
	}
	bad := func(m *arch.Model) (*qmodel.Prepared, error) {
		return &qmodel.Prepared{Outliers: map[string][]int{"model.norm.weight": {1}}}, nil
	}
	if _, err := qmodel.Quantize(src, filepath.Join(dir, "bad"), qmodel.Options{Recipe: preset(t, "w4a16-lpbq"), Prepare: bad}); err == nil {
		t.Fatal("outlier channels of a norm gain were accepted")
	}
}

// TestSharedGPTQFactor quantizes with one Hessian shared by q, k and v
// (factored once) and checks each weight's integers against GPTQ run on
// it alone.
func TestSharedGPTQFactor(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	cfg := tinymodel.Config{HiddenSize: 64, IntermediateSize: 96, NumLayers: 2, NumHeads: 4, NumKVHeads: 2, VocabSize: 80, MaxPositions: 32}
	if err := tinymodel.WriteLlama(src, cfg, 7); err != nil {
		t.Fatal(err)
	}
	ck, err := detect.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := arch.Load(ck)
	ck.Close()
	if err != nil {
		t.Fatal(err)
	}
	const k = 64
	h := make([]float64, k*k)
	for r := range 3 * k {
		x := make([]float64, k)
		for c := range x {
			x[c] = float64((r*31+c*17)%23-11) * float64(1+c%5)
		}
		for a := range k {
			for b := range k {
				h[a*k+b] += x[a] * x[b]
			}
		}
	}
	names := []string{"model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight", "model.layers.1.self_attn.v_proj.weight"}
	opts := quant.GPTQOptions{ActOrder: true}
	prepare := func(m *arch.Model) (*qmodel.Prepared, error) {
		p := &qmodel.Prepared{Hessians: map[string][]float64{}, GPTQ: opts}
		for _, n := range names {
			p.Hessians[n] = h
		}
		return p, nil
	}
	out := filepath.Join(dir, "q")
	if _, err := qmodel.Quantize(src, out, qmodel.Options{Recipe: preset(t, "w4a16-lpbq"), Prepare: prepare, Jobs: 3}); err != nil {
		t.Fatal(err)
	}
	f, err := qmodel.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, n := range names {
		e := f.Manifest.Tensors[n]
		if !e.GPTQ {
			t.Fatalf("%s: not marked GPTQ", n)
		}
		want, err := quant.QuantizeGPTQ(orig.Weights[n], e.Shape[0], e.Shape[1], e.Scheme.Quant(), h, opts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.Quantized(n)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Q, want.Q) {
			t.Fatalf("%s: integers differ from GPTQ on the weight alone", n)
		}
	}
}

// TestEmbeddingOverride: a lookup-only embedding table is W8 unless an
// override names it; then it takes that scheme, and the loaded model's
// table is that scheme's dequantization of the float one.
func TestEmbeddingOverride(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	const embed = "model.embed_tokens.weight"
	ck, err := detect.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	float, err := arch.Load(ck)
	ck.Close()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		recipe, scheme string
		want           quant.Scheme
	}{
		{`{"name": "b32", "default": {"scheme": "lpbq", "block": 32}}`, "w8", quant.Scheme{Kind: quant.KindW8}},
		{`{"name": "b32-e4", "default": {"scheme": "lpbq", "block": 32},
		   "overrides": [{"pattern": "model.embed_tokens.weight", "scheme": "lpbq", "block": 32}]}`,
			"lpbq/b32/refined", quant.Scheme{Kind: quant.KindLPBQ, Block: 32}},
		{`{"name": "b32-eq4", "default": {"scheme": "lpbq", "block": 32},
		   "overrides": [{"pattern": "re:embed_tokens", "scheme": "q4", "group": 32, "sym": true}]}`,
			"q4/g32/sym", quant.Scheme{Kind: quant.KindQ4, Block: 32, Sym: true}},
	} {
		r, err := quant.ParseRecipe([]byte(c.recipe))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, r.Name)
		rep, err := qmodel.Quantize(src, out, qmodel.Options{Recipe: r})
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(rep.Tensors, func(tr qmodel.TensorReport) bool { return tr.Name == embed })
		if i < 0 || rep.Tensors[i].Scheme != c.scheme {
			t.Fatalf("%s: embedding reported as %+v, want %s", r.Name, rep.Tensors, c.scheme)
		}
		m, _, err := qmodel.Load(out)
		if err != nil {
			t.Fatal(err)
		}
		w := float.Weights[embed]
		q, err := quant.Quantize(w, 512, len(w)/512, c.want)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(m.Weights[embed], q.Dequantize()) {
			t.Errorf("%s: the loaded table is not the %s dequantization of the float one", r.Name, c.scheme)
		}
	}
}

// TestQ6KScheme: a recipe's q6k classifier stays q6k (6.625 bits) on a
// model 256 wide and reads back; on stories260K (64 wide) it becomes W8
// with the fallback reported, with or without --fallback-w8 (q6k has no
// padded form).
func TestQ6KScheme(t *testing.T) {
	r, err := quant.ParseRecipe([]byte(`{"default": {"scheme": "w8"}, "overrides": [{"pattern": "lm_head.weight", "scheme": "q6k"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	wide := filepath.Join("..", "..", "cmd", "aotlm", "testdata", "kquant", "qwen3-Q6_K.gguf")
	stories := testutil.Path(t, "models/stories260K/stories260K.gguf")
	for _, c := range []struct {
		src, tensor, scheme string
	}{{wide, "model.embed_tokens.weight", "q6k"}, {stories, "lm_head.weight", "w8"}} { // tied, untied
		out := filepath.Join(t.TempDir(), "q")
		rep, err := qmodel.Quantize(c.src, out, qmodel.Options{Recipe: r})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, tr := range rep.Tensors {
			if tr.Name != c.tensor {
				continue
			}
			found = true
			if tr.Scheme != c.scheme || (c.scheme == "q6k") != (tr.Bits == 6.625) || (c.scheme == "w8") == (tr.Fallback == "") {
				t.Errorf("%s: %+v, want %s", c.src, tr, c.scheme)
			}
		}
		if !found {
			t.Fatalf("%s: no %s in the report", c.src, c.tensor)
		}
		if _, _, err := qmodel.Load(out); err != nil {
			t.Fatal(err)
		}
	}
}
