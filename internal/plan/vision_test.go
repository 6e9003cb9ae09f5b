package plan

import (
	"errors"
	"testing"

	"github.com/aotlm/aotlm/internal/op"
)

func TestManifestVisionValidate(t *testing.T) {
	good := func() *Manifest {
		return &Manifest{Format: ManifestFormat, Architecture: "llama", BOS: 1, Vocab: 16, Ctx: 32,
			Plans: []PlanRef{{ARLen: 1, Blob: BlobName(1)}}, Weights: "f32",
			Vision: &Vision{Family: "idefics3", Config: []byte(`{"image_size":512}`), Weights: "w8",
				Markers: map[string]int{"<image>": 3},
				Plans:   []VisionPlanRef{{Name: VisionPlanName(512, 512), Height: 512, Width: 512, Tokens: 64, Blob: VisionBlobName(512, 512)}}}}
	}
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
	if got := VisionBlobName(448, 672); got != "plan/vision/448x672" {
		t.Fatalf("blob name %q", got)
	}
	for field, mut := range map[string]func(v *Vision){
		"manifest.vision.family":          func(v *Vision) { v.Family = "" },
		"manifest.vision.config":          func(v *Vision) { v.Config = []byte(`[1]`) },
		"manifest.vision.weights":         func(v *Vision) { v.Weights = "q4" },
		"manifest.vision.plans":           func(v *Vision) { v.Plans = nil },
		"manifest.vision.plans[0]":        func(v *Vision) { v.Plans[0].Height = 0 },
		"manifest.vision.plans[0].name":   func(v *Vision) { v.Plans[0].Name = "vision/512" },
		"manifest.vision.plans[1].name":   func(v *Vision) { v.Plans = append(v.Plans, v.Plans[0]) },
		"manifest.vision.plans[0].blob":   func(v *Vision) { v.Plans[0].Blob = "" },
		"manifest.vision.plans[0].tokens": func(v *Vision) { v.Plans[0].Tokens = 0 },
		"manifest.vision.markers":         func(v *Vision) { v.Markers["<image>"] = 16 },
	} {
		m := good()
		mut(m.Vision)
		var pe *Error
		if err := m.Validate(); !errors.As(err, &pe) || pe.Field != field {
			t.Errorf("%s: got %v", field, err)
		}
	}
}

// visionPlan is a hand-made vision plan: rows (4x2) -> group_rows by 2
// (2x4).
func visionPlan() *Plan {
	return &Plan{Version: Version, Rows: 4, Arena: 16, KV: KV{Ctx: 1},
		Buffers: []Buffer{{Rows: 4, Cols: 2, Offset: 0}, {Rows: 2, Cols: 4, Offset: 8}},
		Steps:   []Step{{Op: op.Rows, Out: 0}, {Op: op.GroupRows, In: []int{0}, Out: 1, Group: 2}}, Output: 1}
}

func TestVisionStepsValidate(t *testing.T) {
	if err := visionPlan().Validate(); err != nil {
		t.Fatal(err)
	}
	for field, mut := range map[string]func(p *Plan){
		"steps[1].group": func(p *Plan) { p.Steps[1].Group = 3 },
		"steps[1].out":   func(p *Plan) { p.Buffers[1].Cols = 2 },
		"steps[0].out": func(p *Plan) {
			p.Buffers[0].Rows = 2
			p.Steps[1].Group = 1
			p.Buffers[1] = Buffer{Rows: 2, Cols: 2, Offset: 8}
		},
	} {
		p := visionPlan()
		mut(p)
		var pe *Error
		if err := p.Validate(); !errors.As(err, &pe) || pe.Field != field {
			t.Errorf("%s: got %v", field, err)
		}
	}
}
