package compile

import (
	"reflect"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
)

// TestEveryVisionFamilyCompiles: each vision family arch recognizes has
// a compiler with both sources set, and no compiler is left over.
func TestEveryVisionFamilyCompiles(t *testing.T) {
	fams := arch.VisionFamilies()
	if len(fams) < 2 {
		t.Fatalf("%d vision families, want SmolVLM's and Qwen2-VL's", len(fams))
	}
	for _, f := range fams {
		c, err := visionCompilerOf(f)
		if err != nil {
			t.Error(err)
			continue
		}
		v := reflect.ValueOf(*c)
		for i := range v.NumField() {
			if v.Field(i).IsZero() {
				t.Errorf("vision family %s: %s is unset", f.Name, v.Type().Field(i).Name)
			}
		}
	}
	if len(visionCompilers) != len(fams) {
		t.Errorf("%d vision compilers for %d families", len(visionCompilers), len(fams))
	}
}
