package arch

import (
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
)

// metaOnly is a checkpoint of metadata alone.
type metaOnly struct {
	format string
	meta   map[string]any
}

func (m metaOnly) Format() string                        { return m.format }
func (m metaOnly) Metadata() map[string]any              { return m.meta }
func (m metaOnly) Tensors() []format.TensorInfo          { return nil }
func (m metaOnly) ReadFloat32(string) ([]float32, error) { return nil, nil }
func (m metaOnly) Close() error                          { return nil }

// TestVisionFamilyDetection: config.json and an mmproj file's projector
// type each name the family that reads them; a text model and an unknown
// projector name none.
func TestVisionFamilyDetection(t *testing.T) {
	for _, c := range []struct {
		meta map[string]any
		want string
	}{
		{map[string]any{"architectures": []any{"SmolVLMForConditionalGeneration"}}, Idefics3VisionFamily},
		{map[string]any{"model_type": "idefics3"}, Idefics3VisionFamily},
		{map[string]any{"architectures": []any{"Qwen2VLForConditionalGeneration"}}, Qwen2VLVisionFamily},
		{map[string]any{"model_type": "qwen2_5_vl"}, Qwen2VLVisionFamily},
		{map[string]any{"architectures": []any{"LlamaForCausalLM"}, "model_type": "llama"}, ""},
	} {
		got := ""
		if f := VisionFamilyOfHF(c.meta); f != nil {
			got = f.Name
		}
		if got != c.want {
			t.Errorf("config %v: family %q, want %q", c.meta, got, c.want)
		}
	}
	for proj, want := range map[string]string{"idefics3": Idefics3VisionFamily, "qwen2vl_merger": Qwen2VLVisionFamily,
		"qwen2.5vl_merger": Qwen2VLVisionFamily} {
		f, err := VisionFamilyOfMMProj(metaOnly{"gguf", map[string]any{"general.architecture": "clip", "clip.projector_type": proj}})
		if err != nil || f.Name != want {
			t.Errorf("projector %s: %v, %v; want %s", proj, f, err, want)
		}
	}
	for _, c := range []struct {
		ck   metaOnly
		want string
	}{
		{metaOnly{"gguf", map[string]any{"general.architecture": "clip", "clip.projector_type": "ldp"}}, `projector type "ldp" is not supported`},
		{metaOnly{"gguf", map[string]any{"general.architecture": "llama"}}, "want clip"},
		{metaOnly{"safetensors", nil}, "not a GGUF file"},
	} {
		if _, err := VisionFamilyOfMMProj(c.ck); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.ck, err, c.want)
		}
	}
}
