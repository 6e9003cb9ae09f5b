package quant

import (
	"path/filepath"
	"testing"
)

// TestDocRecipes checks that the recipe files docs/quantization.md uses
// parse, and that their calibration and rotation fields are read.
func TestDocRecipes(t *testing.T) {
	files, err := filepath.Glob("../../docs/recipes/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recipe files: %v", err)
	}
	for _, f := range files {
		r, err := LoadRecipe(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if !r.Calibration.Needed() && r.Rotation == (Rotation{}) {
			t.Errorf("%s: neither calibration nor rotation", f)
		}
	}
	if _, err := ParseRecipe([]byte(`{"default": {"scheme": "w8"}, "calibration": {"gptq": true, "bogus": 1}}`)); err == nil {
		t.Error("an unknown calibration field was accepted")
	}
	if _, err := ParseRecipe([]byte(`{"default": {"scheme": "w8"}, "rotation": {"r1": "givens"}}`)); err == nil {
		t.Error("an unknown rotation was accepted")
	}
	if _, err := ParseRecipe([]byte(`{"default": {"scheme": "w8"}, "calibration": {"smooth_alpha": 2}}`)); err == nil {
		t.Error("smooth_alpha 2 was accepted")
	}
}
