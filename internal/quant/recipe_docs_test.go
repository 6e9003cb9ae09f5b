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
	for _, c := range []string{`"outliers": 0.6`, `"outliers": -0.1`, `"outliers": 0.01, "outlier_ratio": 0.5`,
		`"outliers": 0.01, "sequential": true`} {
		if _, err := ParseRecipe([]byte(`{"default": {"scheme": "w8"}, "calibration": {` + c + `}}`)); err == nil {
			t.Errorf("calibration {%s} was accepted", c)
		}
	}
	if r, err := ParseRecipe([]byte(`{"default": {"scheme": "w8"}, "calibration": {"outliers": 0.01, "outlier_ratio": 4}}`)); err != nil || !r.Calibration.Needed() {
		t.Errorf("outliers 0.01 ratio 4: %v (needs calibration: %v)", err, err == nil && r.Calibration.Needed())
	}
}
