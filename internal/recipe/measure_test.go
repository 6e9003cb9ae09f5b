package recipe

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

// tinyModel writes a small Llama checkpoint folder with a SentencePiece
// tokenizer and returns it.
func tinyModel(t *testing.T) string {
	t.Helper()
	tok := testutil.ReadFile(t, "llama2c/tok512-dratman/tok512.model")
	dir := filepath.Join(t.TempDir(), "tiny")
	cfg := tinymodel.Config{HiddenSize: 32, IntermediateSize: 64, NumLayers: 2, NumHeads: 4, NumKVHeads: 2, VocabSize: 512, MaxPositions: 64}
	if err := tinymodel.WriteLlama(dir, cfg, 2); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.model"), tok, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSensitivityRanksEveryLinear: every linear weight gets one row, most
// sensitive first, each quantized alone away from the float model
// (positive KL), and the size estimate counts every parameter once.
func TestSensitivityRanksEveryLinear(t *testing.T) {
	src := tinyModel(t)
	r, err := quant.Preset("w4a16-lpbq")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("Once upon a time there was a little girl who liked to play in the park. ", 20)
	rows, base, err := Sensitivity(src, r, text, "", 32, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2*7 + 1; len(rows) != want { // q, k, v, o, gate, up, down per layer, the classifier
		t.Fatalf("%d rows, want %d", len(rows), want)
	}
	if !(base > 1) {
		t.Errorf("float perplexity %v", base)
	}
	seen := map[string]bool{}
	for i, row := range rows {
		if seen[row.Name] {
			t.Errorf("%s twice", row.Name)
		}
		seen[row.Name] = true
		if !(row.KL > 0) || row.Params <= 0 || row.Bits > row.W8Bits {
			t.Errorf("row %+v", row)
		}
		if i > 0 && rows[i-1].KL < row.KL {
			t.Errorf("%s (KL %v) after %s (KL %v)", row.Name, row.KL, rows[i-1].Name, rows[i-1].KL)
		}
	}
	other, total, err := OtherBits(src, r, rows)
	if err != nil {
		t.Fatal(err)
	}
	linear := 0
	for _, row := range rows {
		linear += row.Params
	}
	if total <= linear || !(other > 0) || math.IsInf(other, 0) {
		t.Errorf("other %v bits, %d parameters (%d in linears)", other, total, linear)
	}
	if _, _, err := Sensitivity(filepath.Join(t.TempDir(), "missing"), r, text, "", 32, 2, 1); err == nil {
		t.Error("a missing model was accepted")
	}
}

// TestLoadRecipe: a preset by name, a recipe file by path, and an error
// naming the presets for anything else; WithLPBQMode marks the name.
func TestLoadRecipe(t *testing.T) {
	r, err := Load("w4a16-lpbq")
	if err != nil || r.Default.Kind != quant.KindLPBQ {
		t.Fatalf("preset: %+v, %v", r, err)
	}
	if ref := WithLPBQMode(r, quant.LPBQReference); ref.Default.Mode != quant.LPBQReference || !strings.HasSuffix(ref.Name, "+reference") {
		t.Errorf("reference mode: %+v", ref)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "nope.json")); err == nil || !strings.Contains(err.Error(), "w4a16-lpbq") {
		t.Errorf("a missing recipe: %v", err)
	}
	if !slices.Contains(quant.PresetNames(), "w4a16-lpbq") {
		t.Fatal("no w4a16-lpbq preset")
	}
}
