package compile

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestVisionWeightsByRecipe: a 4-bit text model quantized with a recipe
// whose vision part names the encoder's storage, compiled with the
// mmproj, stores the encoder so (the manifest says it, the tensors have
// its layout); --vision-weights overrides it; a recipe without one gets
// DefaultVisionWeights.
func TestVisionWeightsByRecipe(t *testing.T) {
	dir := testutil.Path(t, "vlm/smolvlm")
	quantize := func(recipe string) string {
		r, err := quant.ParseRecipe([]byte(recipe))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "q")
		if _, err := qmodel.Quantize(filepath.Join(dir, "text.gguf"), out, qmodel.Options{Recipe: r}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, c := range []struct {
		name, recipe, flag, want, layout string
	}{
		{"recipe w8", `{"name": "q4-vw8", "default": {"scheme": "q4"}, "vision": {"weights": "w8"}}`, "", "w8", "w8-rows-p"},
		{"recipe f32", `{"name": "q4-vf32", "default": {"scheme": "q4"}, "vision": {"weights": "f32"}}`, "", "f32", ""},
		{"flag over recipe", `{"name": "q4-vw8", "default": {"scheme": "q4"}, "vision": {"weights": "w8"}}`, "f16", "f16", "f16-rows"},
		{"default", `{"name": "q4", "default": {"scheme": "q4"}}`, "", DefaultVisionWeights, "f16-rows"},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := quantize(c.recipe)
			out := filepath.Join(t.TempDir(), "vlm.aot")
			opts := Options{ARLens: []int{4}, Ctx: 64, MMProj: filepath.Join(dir, "mmproj.gguf"), VisionWeights: c.flag}
			if err := CompileFile(q, out, opts); err != nil {
				t.Fatal(err)
			}
			a, err := artifact.Open(out, artifact.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			var m plan.Manifest
			if err := a.Manifest(&m); err != nil {
				t.Fatal(err)
			}
			if m.Vision == nil || m.Vision.Weights != c.want {
				t.Fatalf("manifest vision %+v, want weights %q", m.Vision, c.want)
			}
			blob, err := a.Blob(m.Vision.Plans[0].Blob)
			if err != nil {
				t.Fatal(err)
			}
			vp, err := plan.Decode(blob)
			if err != nil {
				t.Fatal(err)
			}
			layouts := map[string]string{}
			text4 := 0
			for _, ti := range a.Tensors() {
				layouts[ti.Name] = ti.Layout
				if strings.HasPrefix(ti.Layout, "q4-") {
					text4++
				}
			}
			enc := 0
			for _, st := range vp.Steps {
				if st.Op != op.Linear {
					continue
				}
				if l := layouts[st.Weights[0]]; l != c.layout {
					t.Fatalf("encoder linear %q has layout %q, want %q", st.Weights[0], l, c.layout)
				}
				enc++
			}
			if text4 == 0 || enc == 0 {
				t.Fatalf("%d 4-bit text tensors, %d encoder matrices in layout %q", text4, enc, c.layout)
			}
		})
	}
	if err := CompileFile(filepath.Join(dir, "text.gguf"), filepath.Join(t.TempDir(), "x.aot"),
		Options{ARLens: []int{4}, Ctx: 64, MMProj: filepath.Join(dir, "mmproj.gguf"), VisionWeights: "f8"}); err == nil ||
		!strings.Contains(err.Error(), `vision weights "f8" is not f32, f16 or w8`) {
		t.Fatalf("vision weights f8: %v", err)
	}
}
