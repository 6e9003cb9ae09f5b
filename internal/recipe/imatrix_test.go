package recipe

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestQuantizeImatrix: an importance matrix in llama-imatrix's layout,
// by llama.cpp's tensor names, weighs the grid search of the linears it
// names: their error weighted by it is lower than plain rounding's; the
// others get the search weighing their inputs alike, and the manifest
// names the file. With a calibrated recipe it is refused.
func TestQuantizeImatrix(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	named := []string{"model.layers.0.self_attn.q_proj.weight", "model.layers.2.mlp.gate_proj.weight"}
	imp := func(c int) float32 {
		if c%7 == 0 {
			return 50
		}
		return 1
	}
	var ts []gguf.WriteTensor
	for _, n := range named {
		g, ok := arch.GGUFDecoderName(n)
		if !ok {
			t.Fatalf("no GGUF name for %s", n)
		}
		sums := make([]float32, 64)
		for c := range sums {
			sums[c] = 10 * imp(c) // 10 tokens
		}
		ts = append(ts, gguf.WriteTensor{Name: g + ".in_sum2", DType: tensor.F32, Shape: []int64{1, 64}, Values: sums},
			gguf.WriteTensor{Name: g + ".counts", DType: tensor.F32, Shape: []int64{1, 1}, Values: []float32{10}})
	}
	dir := t.TempDir()
	imPath := filepath.Join(dir, "im.gguf")
	f, err := os.Create(imPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.Write(f, []gguf.KV{{Key: "general.type", Value: "imatrix"}}, ts); err != nil {
		t.Fatal(err)
	}
	f.Close()

	r, err := quant.Preset("lpbq4-h6")
	if err != nil {
		t.Fatal(err)
	}
	plain, withIM := filepath.Join(dir, "plain"), filepath.Join(dir, "im")
	if _, err := Quantize(src, plain, QuantizeOptions{Recipe: r}); err != nil {
		t.Fatal(err)
	}
	if _, err := Quantize(src, withIM, QuantizeOptions{Recipe: r, Imatrix: imPath}); err != nil {
		t.Fatal(err)
	}
	man, err := qmodel.ReadManifest(withIM)
	if err != nil {
		t.Fatal(err)
	}
	var rec Record
	if err := json.Unmarshal(man.Calibration, &rec); err != nil || rec.Imatrix != "im.gguf" || !rec.Methods.GridSearch {
		t.Errorf("manifest calibration %s does not name the importance matrix", man.Calibration)
	}
	fm, err := load.Float(src)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := load.Float(plain)
	if err != nil {
		t.Fatal(err)
	}
	im, err := load.Float(withIM)
	if err != nil {
		t.Fatal(err)
	}
	werr := func(q []float32, w []float32) float64 {
		var e float64
		for i := range w {
			d := float64(q[i] - w[i])
			e += float64(imp(i%64)) * d * d
		}
		return e
	}
	for _, n := range named {
		w := fm.Weights[n]
		ep, ei := werr(pm.Weights[n], w), werr(im.Weights[n], w)
		t.Logf("%s: weighted error %.6g plain, %.6g with the importance matrix", n, ep, ei)
		if !(ei <= ep) || ei == ep {
			t.Errorf("%s: weighted error %.6g with the importance matrix, %.6g without: want lower", n, ei, ep)
		}
	}
	// a linear the matrix does not name gets the grid search weighing
	// its inputs alike
	other := "model.layers.1.self_attn.q_proj.weight"
	var up, ui float64
	for i, w := range fm.Weights[other] {
		dp, di := float64(pm.Weights[other][i]-w), float64(im.Weights[other][i]-w)
		up, ui = up+dp*dp, ui+di*di
	}
	if !(ui <= up) {
		t.Errorf("%s: squared error %.6g with the grid search, %.6g without", other, ui, up)
	}

	rc, err := quant.LoadRecipe("../../docs/recipes/lpbq4-h6-gs-gptq.json")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Quantize(src, filepath.Join(dir, "both"), QuantizeOptions{Recipe: rc, Imatrix: imPath,
		Calib: CalibOptions{File: testutil.Path(t, "text/TinyStories-valid-excerpt.txt"), Tokenizer: src}})
	if err == nil || !strings.Contains(err.Error(), "use one or the other") {
		t.Errorf("imatrix with a calibrated recipe: %v", err)
	}
}
