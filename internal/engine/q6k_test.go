package engine_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
)

// TestQ6KClassifierParity: a recipe that puts the classifier (the tied
// embedding) at q6k on a model 256 wide (the Qwen3 of cmd/aotlm's k-quant
// fixtures, its weights decoded and requantized) gives a folder whose
// artifact holds a q6k-p tensor and computes the logits of the graph
// interpreter over the dequantized folder: within packedLogitTol with
// int8 activations, within logitTol with float activations (where q6k is
// stored dequantized); its q6k-p tensor cut short or reshaped is refused
// by name.
func TestQ6KClassifierParity(t *testing.T) {
	r, err := quant.ParseRecipe([]byte(`{"default": {"scheme": "lpbq", "block": 32},
		"overrides": [{"pattern": "lm_head.weight", "scheme": "q6k"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join("..", "..", "cmd", "aotlm", "testdata", "kquant", "qwen3-Q6_K.gguf")
	dir := filepath.Join(t.TempDir(), "q6k")
	if _, err := qmodel.Quantize(src, dir, qmodel.Options{Recipe: r}); err != nil {
		t.Fatal(err)
	}
	m, _, err := qmodel.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, path := compilePath(t, dir, compile.Options{ARLens: []int{4}, Ctx: 64})
	checkQ6KRefused(t, path)
	if l := layouts(t, path); l["q6k-p"] != 1 || l["lpbq-b32-p"] == 0 {
		t.Fatalf("layouts %v: want one q6k-p tensor and lpbq-b32-p ones", l)
	}
	checkParityTol(t, m, e, 4, engine.ModeHybrid, packedLogitTol)
	checkParityTol(t, m, e, 1, engine.ModeKV, packedLogitTol)

	ef, pathf := compilePath(t, dir, compile.Options{ARLens: []int{4}, Ctx: 64, FloatActivations: true})
	if l := layouts(t, pathf); l["q6k-p"] != 0 {
		t.Fatalf("layouts %v: q6k-p with float activations", l)
	}
	checkParity(t, m, ef, 4, engine.ModeHybrid)
}

// checkQ6KRefused rewrites the artifact at path with its q6k-p tensor
// cut short or reshaped to 128 inputs a row; Open must name the problem.
func checkQ6KRefused(t *testing.T, path string) {
	for _, c := range []struct {
		name, want string
		edit       func(p *parts, i int)
	}{
		{"short", "bytes, layout q6k-p", func(p *parts, i int) {
			n := p.tensors[i].Name
			p.data[n] = p.data[n][:len(p.data[n])-4]
		}},
		{"width", "inputs a multiple of 256", func(p *parts, i int) {
			sh := p.tensors[i].Shape
			p.tensors[i].Shape = []int64{2 * sh[0], sh[1] / 2}
		}},
	} {
		p := takeApart(t, path)
		found := false
		for i, ti := range p.tensors {
			if ti.Layout == "q6k-p" {
				c.edit(p, i)
				found = true
			}
		}
		if !found {
			t.Fatal("no q6k-p tensor")
		}
		e, err := engine.Open(p.write(t, t.TempDir()))
		if err == nil {
			e.Close()
			t.Fatalf("%s: accepted", c.name)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: error %q does not mention %q", c.name, err, c.want)
		}
	}
}
