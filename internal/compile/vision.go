package compile

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/aotlm/aotlm/internal/userfile"
	"os"
	"path/filepath"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// Vision weight storage (Options.VisionWeights).
const (
	VisionF32 = "f32" // float32
	VisionF16 = "f16" // linear matrices as IEEE binary16 rows (the default)
	VisionW8  = "w8"  // linear matrices as 8-bit rows, one scale per row
)

// DefaultVisionWeights is the encoder's storage when neither the options
// nor the recipe name one. Binary16 halves the encoder's matrices for
// embeddings within 3e-4 to 5e-4 (relative RMS) of float32's on the test
// fixtures, w8 quarters them for 1.4% to 2.1% (docs/quantization.md).
const DefaultVisionWeights = VisionF16

// VisionWeightModes lists the vision weight storages.
var VisionWeightModes = []string{VisionF32, VisionF16, VisionW8}

// checkVisionWeights resolves a vision weight storage: "" is
// DefaultVisionWeights, anything else must be one of VisionWeightModes.
func checkVisionWeights(weights string) (string, error) {
	switch weights {
	case "":
		return DefaultVisionWeights, nil
	case VisionF32, VisionF16, VisionW8:
		return weights, nil
	}
	return "", fmt.Errorf("compile: vision weights %q is not %s, %s or %s", weights, VisionF32, VisionF16, VisionW8)
}

// VisionInput is an image encoder compiled into the same artifact as the
// text model: its plans go beside the text plans and its weights into the
// same weights section (their names must differ from the text model's).
type VisionInput struct {
	Graph   *graph.Graph
	Weights graph.Weights // float32
	// Sizes lists the images the encoder is planned for, one plan each.
	Sizes []VisionSize
	// Family, Config and Markers go to the manifest (plan.Vision).
	Family  string
	Config  json.RawMessage
	Markers map[string]int
	// Weights8 stores the encoder's linear matrices as 8-bit rows
	// (quant.QuantizeW8), packed for the int8 kernels where they can be.
	Weights8 bool
	// WeightsF16 stores them as binary16 rows (quant.QuantizeF16, plan
	// layout f16-rows) instead.
	WeightsF16 bool
}

// VisionSize is one image size a vision plan encodes: Height x Width
// pixels, read as Rows input rows.
type VisionSize struct{ Height, Width, Rows int }

// lowerVision returns the plans of v and their manifest entry.
func lowerVision(v *VisionInput) ([]*plan.Plan, *plan.Vision, error) {
	if v.Graph == nil || len(v.Sizes) == 0 {
		return nil, nil, errors.New("compile: a vision encoder with no graph or no image size")
	}
	mv := &plan.Vision{Family: v.Family, Config: v.Config, Markers: v.Markers, Weights: VisionF32}
	switch {
	case v.Weights8 && v.WeightsF16:
		return nil, nil, errors.New("compile: vision weights both w8 and f16")
	case v.Weights8:
		mv.Weights = VisionW8
	case v.WeightsF16:
		mv.Weights = VisionF16
	}
	var plans []*plan.Plan
	for _, s := range v.Sizes {
		p, err := LowerVision(v.Graph, s.Rows)
		if err != nil {
			return nil, nil, err
		}
		plans = append(plans, p)
		mv.Plans = append(mv.Plans, plan.VisionPlanRef{Name: plan.VisionPlanName(s.Height, s.Width),
			Height: s.Height, Width: s.Width, Tokens: p.Buffers[p.Output].Rows, Blob: plan.VisionBlobName(s.Height, s.Width)})
	}
	return plans, mv, nil
}

// visionSource serves an encoder's weights, the linear matrices at 8 bits
// when w8 is set, as binary16 rows when f16 is.
type visionSource struct {
	w       graph.Weights
	shapes  map[string][]int
	linear  map[string]bool // weights that are linear matrices
	w8, f16 bool
}

func newVisionSource(v *VisionInput) *visionSource {
	s := &visionSource{w: v.Weights, shapes: v.Graph.Weights, linear: map[string]bool{}, w8: v.Weights8, f16: v.WeightsF16}
	for _, n := range v.Graph.Nodes {
		if n.Op == op.Linear && n.Weight != "" {
			s.linear[n.Weight] = true
		}
	}
	return s
}

func (s *visionSource) Weight(name string) (Weight, error) {
	v, ok := s.w[name]
	if !ok {
		return Weight{}, fmt.Errorf("no vision weight %q", name)
	}
	sh := s.shapes[name]
	if (!s.w8 && !s.f16) || !s.linear[name] || len(sh) != 2 {
		return Weight{Values: v}, nil
	}
	if s.f16 {
		q, err := quant.QuantizeF16(v, sh[0], sh[1])
		if err != nil {
			return Weight{}, err
		}
		return Weight{Quantized: q, F16Rows: true}, nil
	}
	q, err := quant.QuantizeW8(v, sh[0], sh[1])
	if err != nil {
		return Weight{}, err
	}
	return Weight{Quantized: q}, nil
}

// bothSource serves the text model's weights and the encoder's.
type bothSource struct {
	text   WeightSource
	vision *visionSource
}

func (b bothSource) Weight(name string) (Weight, error) {
	if _, ok := b.vision.w[name]; ok {
		return b.vision.Weight(name)
	}
	return b.text.Weight(name)
}

// visionCompiler makes the VisionInput of one vision family
// (arch.VisionFamily, by name) from either source of its encoder.
type visionCompiler struct {
	// fromHF reads the encoder of a Hugging Face checkpoint; pre is its
	// preprocessor_config.json or nil.
	fromHF func(ck format.Checkpoint, pre map[string]any, textHidden int, tok tokenizer.Tokenizer, opts Options) (*VisionInput, error)
	// fromMMProj reads it from llama.cpp's mmproj GGUF.
	fromMMProj func(mm format.Checkpoint, textHidden int, tok tokenizer.Tokenizer, opts Options) (*VisionInput, error)
}

// visionCompilers holds each vision family's compiler, by family name.
var visionCompilers = map[string]*visionCompiler{}

func registerVisionCompiler(family string, c *visionCompiler) { visionCompilers[family] = c }

// visionCompilerOf returns the compiler of family f.
func visionCompilerOf(f *arch.VisionFamily) (*visionCompiler, error) {
	c, ok := visionCompilers[f.Name]
	if !ok {
		return nil, fmt.Errorf("compile: no compiler for the %s vision encoder", f.Name)
	}
	return c, nil
}

// loadVision reads the encoder of a vision-language model, when path is
// one: a Hugging Face folder of a vision family (ck), or any text model
// with opts.MMProj (ck may then be nil). It returns nil for a text model.
// textHidden is the text model's width; tok, when set, gives the markers'
// ids.
func loadVision(path string, ck format.Checkpoint, textHidden int, tok tokenizer.Tokenizer, opts Options) (*VisionInput, error) {
	if opts.MMProj != "" {
		mm, err := detect.Open(opts.MMProj)
		if err != nil {
			return nil, fmt.Errorf("mmproj: %w", err)
		}
		defer mm.Close()
		f, err := arch.VisionFamilyOfMMProj(mm)
		if err != nil {
			return nil, err
		}
		c, err := visionCompilerOf(f)
		if err != nil {
			return nil, err
		}
		return c.fromMMProj(mm, textHidden, tok, opts)
	}
	if ck != nil && ck.Format() == "safetensors" {
		if f := arch.VisionFamilyOfHF(ck.Metadata()); f != nil {
			c, err := visionCompilerOf(f)
			if err != nil {
				return nil, err
			}
			pre, err := readPreproc(path)
			if err != nil {
				return nil, err
			}
			return c.fromHF(ck, pre, textHidden, tok, opts)
		}
	}
	if opts.VisionWeights != "" && opts.VisionWeights != VisionF32 {
		return nil, fmt.Errorf("compile: vision weights %q asked for a model with no vision encoder", opts.VisionWeights)
	}
	if opts.VisionBuckets != "" {
		return nil, errors.New("compile: image sizes asked for a model with no vision encoder")
	}
	return nil, nil
}

// markerIDs looks each piece up with tok (nil: none), keeping the pieces
// that are one token.
func markerIDs(tok tokenizer.Tokenizer, pieces []string) map[string]int {
	markers := map[string]int{}
	if tok != nil {
		for _, p := range pieces {
			ids := tok.Encode(p, tokenizer.EncodeOptions{ParseSpecial: true})
			if len(ids) == 1 {
				markers[p] = ids[0]
			}
		}
	}
	return markers
}

// readPreproc reads the preprocessor_config.json of a Hugging Face
// folder, or nil when it has none.
func readPreproc(path string) (map[string]any, error) {
	var pre map[string]any
	b, err := userfile.ReadFile(filepath.Join(path, "preprocessor_config.json"), userfile.Config)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &pre); err != nil {
			return nil, fmt.Errorf("preprocessor_config.json: %w", err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	return pre, nil
}
