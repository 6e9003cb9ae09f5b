package arch

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
)

// Qwen2-VL vision-language models: a ViT over the P x P patches (14 in
// the published models) of a dynamic-resolution image (a Conv3d over two
// copies of the frame, computed as a matmul over the duplicated patch),
// pre-norm blocks of bidirectional attention with a 2-D rotary embedding
// (the first half of each head's pairs turns by the patch row, the second
// by its column) and a quick-GELU MLP, then a merger (LayerNorm, each 2x2
// block of patches joined into one row, Linear-GELU-Linear to the text
// width). The text model is Qwen2 with M-RoPE: the rotary pairs split into
// t, h and w sections, each turned by its own component of a 3-D
// position, so that an image's rows sit at (p0, p0+row, p0+col).

// The text model alone is the "qwen2vl" family: loading, compiling and
// running a Qwen2-VL checkpoint without images uses it (its positions are
// then (p, p, p): plain RoPE); LoadQwen2VL adds the vision encoder.
// Qwen2.5-VL's text model is the same (qwen25vl.go holds what its vision
// encoder does differently).
func init() {
	register(&Family{
		Name:              "qwen2vl",
		HFArchitectures:   []string{"Qwen2VLForConditionalGeneration", qwen25vlArchitecture},
		HFModelTypes:      []string{"qwen2_vl", qwen25vlModelType},
		GGUFArchitectures: []string{"qwen2vl"},
		configHF:          qwen2vlConfigHF,
		configGGUF:        qwen2vlConfigGGUF,
		tensorNames:       decoderTensorName,
		build:             buildDecoder,
	})
	registerVision(&VisionFamily{Name: Qwen2VLVisionFamily, IsHF: isQwen2VL, Projectors: []string{qwen2vlProjector, qwen25vlProjector}})
}

// Qwen2VLVisionFamily is the vision family of Qwen2-VL and Qwen2.5-VL
// models (one encoder graph with Qwen2.5-VL's options).
const Qwen2VLVisionFamily = "qwen2vl"

// qwen2vlConfigHF reads the text model of a qwen2_vl config.json: its
// fields at the top level (the published checkpoints) or under
// text_config (newer transformers), rope_scaling.mrope_section giving the
// M-RoPE sections.
func qwen2vlConfigHF(m map[string]any) (Config, error) {
	if tc, ok := m["text_config"].(map[string]any); ok {
		m = tc
	}
	var sections []int
	if rs, ok := m["rope_scaling"].(map[string]any); ok {
		t, _ := format.MetaString(rs, "type")
		if rt, ok := format.MetaString(rs, "rope_type"); ok {
			t = rt
		}
		if t != "mrope" && t != "default" && t != "" {
			return Config{}, fmt.Errorf("config.json: rope_scaling type %q is not supported for qwen2_vl (want mrope)", t)
		}
		l, ok := format.List(rs["mrope_section"])
		if !ok {
			return Config{}, errors.New("config.json: rope_scaling.mrope_section is missing")
		}
		for _, x := range l {
			n, ok := format.MetaInt(map[string]any{"v": x}, "v")
			if !ok {
				return Config{}, fmt.Errorf("config.json: rope_scaling.mrope_section holds %s", show(x))
			}
			sections = append(sections, int(n))
		}
		m = withoutKey(m, "rope_scaling")
	}
	c, err := decoderConfigHF(m, "qwen2vl", graph.RopeHalf)
	c.QKVBias = true
	c.RopeSections = sections
	return c, err
}

// withoutKey returns a shallow copy of m without key.
func withoutKey(m map[string]any, key string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// qwen2vlConfigGGUF reads llama.cpp's qwen2vl text GGUF: Qwen2 with
// rope.dimension_sections (four values, trailing zeros dropped).
func qwen2vlConfigGGUF(m map[string]any, arch string) (Config, error) {
	c, err := decoderConfigGGUF(m, arch, "qwen2vl", graph.RopeHalf)
	c.QKVBias = true
	l, ok := format.List(m[arch+".rope.dimension_sections"])
	if !ok {
		return c, fmt.Errorf("gguf: metadata %s.rope.dimension_sections is missing", arch)
	}
	for _, x := range l {
		n, ok := format.MetaInt(map[string]any{"v": x}, "v")
		if !ok || n < 0 {
			return c, fmt.Errorf("gguf: metadata %s.rope.dimension_sections holds %s", arch, show(x))
		}
		c.RopeSections = append(c.RopeSections, int(n))
	}
	for len(c.RopeSections) > 0 && c.RopeSections[len(c.RopeSections)-1] == 0 {
		c.RopeSections = c.RopeSections[:len(c.RopeSections)-1]
	}
	return c, err
}

// Qwen2VLVision describes a Qwen2-VL vision encoder and its merger.
type Qwen2VLVision struct {
	PatchSize     int     `json:"patch_size"`
	TemporalPatch int     `json:"temporal_patch_size"` // frames one patch spans (a still image is repeated)
	Merge         int     `json:"spatial_merge_size"`  // merger block side
	Channels      int     `json:"in_chans"`
	Hidden        int     `json:"embed_dim"`
	FFN           int     `json:"mlp_dim"`
	Layers        int     `json:"depth"`
	Heads         int     `json:"num_heads"`
	NormEps       float64 `json:"norm_eps"`
	RopeTheta     float64 `json:"rope_theta"`
	TextHidden    int     `json:"text_hidden_size"`
	// Mean and Std normalize the u8/255 pixels per channel.
	Mean [3]float32 `json:"image_mean"`
	Std  [3]float32 `json:"image_std"`
	// ImageTokenID is <|image_pad|>'s id; -1 when the checkpoint does not
	// say (the GGUF pair).
	ImageTokenID int `json:"image_token_id"`

	// Qwen2.5-VL's encoder differs by these (zero: Qwen2-VL's).
	// RMSNorm: the blocks' and the merger's norms are RMSNorm without a
	// bias, not LayerNorm.
	RMSNorm bool `json:"rms_norm,omitempty"`
	// GatedMLP: a block's MLP is down(silu(gate(x)) * up(x)), each with a
	// bias, not fc2(quick_gelu(fc1(x))).
	GatedMLP bool `json:"gated_mlp,omitempty"`
	// WindowSize, in pixels: the blocks not in FullAttnBlocks attend only
	// within windows of WindowSize/PatchSize/Merge merged tokens a side
	// (see WindowPatches); 0: every block attends over the whole image.
	WindowSize     int   `json:"window_size,omitempty"`
	FullAttnBlocks []int `json:"fullatt_block_indexes,omitempty"`
}

// WindowPatches is the side of an attention window in patches (0: no
// window attention): whole merge blocks, WindowSize/PatchSize/Merge of
// them, rounded down as Hugging Face and llama.cpp do.
func (v *Qwen2VLVision) WindowPatches() int {
	if v.WindowSize <= 0 || v.PatchSize <= 0 || v.Merge <= 0 {
		return 0
	}
	return v.WindowSize / v.PatchSize / v.Merge * v.Merge
}

// Validate checks the sizes fit together.
func (v *Qwen2VLVision) Validate() error {
	switch {
	case v.PatchSize <= 0 || v.TemporalPatch <= 0 || v.Merge <= 0 || v.PatchSize > 1024 || v.Merge > 16 || v.TemporalPatch > 16:
		return fmt.Errorf("qwen2-vl vision: patch %d, temporal patch %d, merge %d", v.PatchSize, v.TemporalPatch, v.Merge)
	case v.Channels != 3:
		return fmt.Errorf("qwen2-vl vision: %d channels, want 3", v.Channels)
	case v.Hidden <= 0 || v.FFN <= 0 || v.Layers <= 0 || v.Heads <= 0 || v.Hidden%v.Heads != 0:
		return fmt.Errorf("qwen2-vl vision: hidden %d, ffn %d, %d layers, %d heads do not fit", v.Hidden, v.FFN, v.Layers, v.Heads)
	case (v.Hidden/v.Heads)%4 != 0:
		return fmt.Errorf("qwen2-vl vision: head size %d is not a multiple of 4 (2-D RoPE)", v.Hidden/v.Heads)
	case v.TextHidden <= 0:
		return fmt.Errorf("qwen2-vl vision: text width %d", v.TextHidden)
	case !(v.NormEps > 0 && v.NormEps < 1) || !(v.RopeTheta > 0):
		return fmt.Errorf("qwen2-vl vision: norm epsilon %v, rope theta %v", v.NormEps, v.RopeTheta)
	case v.WindowSize < 0 || (v.WindowSize > 0 && v.WindowPatches() == 0) || v.WindowSize > 1<<20:
		return fmt.Errorf("qwen2-vl vision: window of %d pixels for patches of %d merged by %d", v.WindowSize, v.PatchSize, v.Merge)
	}
	for _, b := range v.FullAttnBlocks {
		if b < 0 || b >= v.Layers {
			return fmt.Errorf("qwen2-vl vision: full-attention block %d of %d", b, v.Layers)
		}
	}
	for c := range v.Std {
		if v.Std[c] == 0 {
			return errors.New("qwen2-vl vision: image_std holds a zero")
		}
	}
	return nil
}

// PatchCols is the width of one input row: a patch of every frame of
// TemporalPatch, C*TemporalPatch*P*P values.
func (v *Qwen2VLVision) PatchCols() int {
	return v.Channels * v.TemporalPatch * v.PatchSize * v.PatchSize
}

// Qwen2VL is a loaded Qwen2-VL model.
type Qwen2VL struct {
	Text          *Model
	Vision        Qwen2VLVision
	VisionWeights graph.Weights
}

// isQwen2VL reports whether config.json metadata names a Qwen2-VL or
// Qwen2.5-VL model.
func isQwen2VL(meta map[string]any) bool {
	archs, _ := format.MetaStrings(meta, "architectures")
	for _, a := range archs {
		if a == "Qwen2VLForConditionalGeneration" || a == qwen25vlArchitecture {
			return true
		}
	}
	mt, _ := format.MetaString(meta, "model_type")
	return mt == "qwen2_vl" || mt == qwen25vlModelType
}

// BuildQwen2VLVision returns the graph from patches to text-width image
// embeddings. It reads T rows of PatchCols() pixels (op.Rows), the
// patches in merge-block order (see Qwen2VLVision.Patches), and each row's
// (row, col) in the patch grid as Input.Positions; it outputs
// T/Merge^2 rows of TextHidden, one per Merge x Merge block.
func BuildQwen2VLVision(v *Qwen2VLVision) (*graph.Graph, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	g := graph.New()
	eps := float32(v.NormEps)
	E := v.Hidden / v.Heads
	// VisionRotaryEmbedding(E/2): E/4 frequencies theta^(-4j/E), used once
	// for the row and once for the column
	q4 := E / 4
	freq := make([]float64, 2*q4)
	for j := 0; j < q4; j++ {
		freq[j] = 1 / math.Pow(v.RopeTheta, float64(2*j)/float64(E/2))
		freq[q4+j] = freq[j]
	}
	rope := graph.Rope{Style: graph.RopeHalf, HeadDim: E, RotDim: E, InvFreq: freq, Sections: []int{q4, q4}}
	norm := func(x int, name string) int {
		if v.RMSNorm {
			return g.RMSNorm(x, name+".weight", eps, 0)
		}
		return g.LayerNorm(x, name+".weight", name+".bias", eps)
	}
	x := g.Linear(g.Rows(v.PatchCols()), "visual.patch_embed.proj.weight", v.Hidden, "")
	for l := 0; l < v.Layers; l++ {
		p := fmt.Sprintf("visual.blocks.%d.", l)
		h := norm(x, p+"norm1")
		qkv := g.Linear(h, p+"attn.qkv.weight", 3*v.Hidden, p+"attn.qkv.bias")
		q, k, val := g.Columns(qkv, 0, v.Hidden), g.Columns(qkv, v.Hidden, 2*v.Hidden), g.Columns(qkv, 2*v.Hidden, 3*v.Hidden)
		q, k = g.RoPE(q, rope), g.RoPE(k, rope)
		// window attention (Qwen2.5-VL): Hugging Face and llama.cpp regroup
		// the merge blocks window by window before the first block and put
		// them back after the merger; every step but attention works row by
		// row and attention within a window does not depend on the order of
		// its rows, so the rows keep their grid order here and attention is
		// limited to the rows of the same window (graph.Attn.Tile)
		tile := v.WindowPatches()
		if slices.Contains(v.FullAttnBlocks, l) {
			tile = 0
		}
		a := g.Attention(q, k, val, graph.Attn{Layer: l, Heads: v.Heads, KVHeads: v.Heads, HeadDim: E,
			Scale: float32(1 / math.Sqrt(float64(E))), Bidirectional: true, Tile: tile})
		x = g.Add(x, g.Linear(a, p+"attn.proj.weight", v.Hidden, p+"attn.proj.bias"))
		h = norm(x, p+"norm2")
		var m int
		if v.GatedMLP {
			gate := g.SiLU(g.Linear(h, p+"mlp.gate_proj.weight", v.FFN, p+"mlp.gate_proj.bias"))
			m = g.Linear(g.Mul(gate, g.Linear(h, p+"mlp.up_proj.weight", v.FFN, p+"mlp.up_proj.bias")),
				p+"mlp.down_proj.weight", v.Hidden, p+"mlp.down_proj.bias")
		} else {
			m = g.Linear(quickGELU(g, g.Linear(h, p+"mlp.fc1.weight", v.FFN, p+"mlp.fc1.bias")),
				p+"mlp.fc2.weight", v.Hidden, p+"mlp.fc2.bias")
		}
		x = g.Add(x, m)
	}
	x = norm(x, "visual.merger.ln_q")
	s2 := v.Merge * v.Merge
	x = g.GroupRows(x, s2)
	// Hugging Face's merger uses the exact (erf) GELU; llama.cpp the tanh
	// approximation, which this follows (the two differ by ~1e-3 here)
	x = g.GELUTanh(g.Linear(x, "visual.merger.mlp.0.weight", s2*v.Hidden, "visual.merger.mlp.0.bias"))
	g.SetOutput(g.Linear(x, "visual.merger.mlp.2.weight", v.TextHidden, "visual.merger.mlp.2.bias"))
	return g, nil
}

// quickGELU is x * sigmoid(1.702 x).
func quickGELU(g *graph.Graph, x int) int { return g.Mul(x, g.Sigmoid(g.Scale(x, 1.702))) }

// Qwen2VLPatches flattens a normalized [C][H][W] image (H and W multiples
// of PatchSize*Merge) into the encoder's input rows: patches in
// merge-block order (Merge x Merge blocks row-major, each block's patches
// row-major), each row the patch's values repeated for every frame
// (channel, frame, row, column: the Conv3d weight's layout). It returns
// the rows, each row's (row, col) in the patch grid, and the merged grid
// (rows, cols of output tokens).
func (v *Qwen2VLVision) Patches(pix []float32, w, h int) (rows []float32, pos []int, gridRows, gridCols int, err error) {
	P, C, M, Tp := v.PatchSize, v.Channels, v.Merge, v.TemporalPatch
	if w <= 0 || h <= 0 || w%(P*M) != 0 || h%(P*M) != 0 {
		return nil, nil, 0, 0, fmt.Errorf("qwen2-vl vision: image of %dx%d is not in blocks of %d", w, h, P*M)
	}
	if len(pix) != C*w*h {
		return nil, nil, 0, 0, fmt.Errorf("qwen2-vl vision: image holds %d values, want %dx%dx%d", len(pix), C, h, w)
	}
	gh, gw := h/P, w/P
	K := v.PatchCols()
	rows = make([]float32, gh*gw*K)
	pos = make([]int, 0, 2*gh*gw)
	r := 0
	for bh := 0; bh < gh/M; bh++ {
		for bw := 0; bw < gw/M; bw++ {
			for mh := 0; mh < M; mh++ {
				for mw := 0; mw < M; mw++ {
					py, px := bh*M+mh, bw*M+mw
					row := rows[r*K : (r+1)*K]
					for c := 0; c < C; c++ {
						for t := 0; t < Tp; t++ {
							for ky := 0; ky < P; ky++ {
								o := ((c*Tp+t)*P + ky) * P
								copy(row[o:o+P], pix[c*w*h+(py*P+ky)*w+px*P:])
							}
						}
					}
					pos = append(pos, py, px)
					r++
				}
			}
		}
	}
	return rows, pos, gh / M, gw / M, nil
}

// LoadQwen2VL reads a Qwen2-VL checkpoint in Hugging Face layout
// (visual.*, model.*, lm_head). preproc is the parsed
// preprocessor_config.json (nil for OpenAI CLIP's mean and std).
func LoadQwen2VL(ck format.Checkpoint, preproc map[string]any) (*Qwen2VL, error) {
	if ck.Format() != "safetensors" {
		return nil, fmt.Errorf("Qwen2-VL loads from Hugging Face folders or a GGUF pair; %s is not supported", ck.Format())
	}
	meta := ck.Metadata()
	if !isQwen2VL(meta) {
		return nil, errors.New("config.json: not a Qwen2-VL model")
	}
	tm, err := Load(ck)
	if err != nil {
		return nil, fmt.Errorf("text model: %w", err)
	}
	v, w, err := LoadQwen2VLVisionHF(ck, preproc, tm.Config.Hidden)
	if err != nil {
		return nil, err
	}
	return &Qwen2VL{Text: tm, Vision: v, VisionWeights: w}, nil
}

// LoadQwen2VLVisionHF reads the vision encoder and merger of a Qwen2-VL
// checkpoint in Hugging Face layout (not its text model), for a text
// model of width textHidden; preproc is the parsed
// preprocessor_config.json or nil.
func LoadQwen2VLVisionHF(ck format.Checkpoint, preproc map[string]any, textHidden int) (Qwen2VLVision, graph.Weights, error) {
	meta := ck.Metadata()
	if !isQwen2VL(meta) {
		return Qwen2VLVision{}, nil, errors.New("config.json: not a Qwen2-VL model")
	}
	vcm, ok := meta["vision_config"].(map[string]any)
	if !ok {
		return Qwen2VLVision{}, nil, errors.New("config.json: \"vision_config\" is missing")
	}
	var v Qwen2VLVision
	var err error
	if isQwen25VL(meta) {
		v, err = qwen25vlVisionHF(vcm, textHidden)
	} else {
		v, err = qwen2vlVisionHF(vcm, textHidden)
	}
	if err != nil {
		return Qwen2VLVision{}, nil, err
	}
	if id, ok := format.MetaInt(meta, "image_token_id"); ok {
		v.ImageTokenID = int(id)
	}
	if err := meanStd(preproc, &v.Mean, &v.Std); err != nil {
		return Qwen2VLVision{}, nil, err
	}
	if err := v.Validate(); err != nil {
		return Qwen2VLVision{}, nil, err
	}
	g, err := BuildQwen2VLVision(&v)
	if err != nil {
		return Qwen2VLVision{}, nil, err
	}
	w, err := readWeights(ck, g, func(name string) string { return name })
	if err != nil {
		return Qwen2VLVision{}, nil, err
	}
	return v, w, nil
}

// qwen2vlVisionHF reads a Qwen2-VL vision_config for a text model of
// width textHidden.
func qwen2vlVisionHF(vcm map[string]any, textHidden int) (Qwen2VLVision, error) {
	var gerr error
	get := func(key string, def int) int {
		n, ok := format.MetaInt(vcm, key)
		if !ok {
			if def < 0 && gerr == nil {
				gerr = fmt.Errorf("config.json vision_config: %q is missing or not an integer", key)
			}
			return def
		}
		return int(n)
	}
	v := Qwen2VLVision{PatchSize: get("patch_size", -1), TemporalPatch: get("temporal_patch_size", 2),
		Merge: get("spatial_merge_size", 2), Channels: get("in_chans", 3), Hidden: get("embed_dim", -1),
		Layers: get("depth", -1), Heads: get("num_heads", -1), NormEps: 1e-6, RopeTheta: 10000,
		TextHidden: textHidden, Mean: clipMean, Std: clipStd, ImageTokenID: -1}
	v.FFN = v.Hidden * get("mlp_ratio", 4)
	if gerr != nil {
		return Qwen2VLVision{}, gerr
	}
	if act, _ := format.MetaString(vcm, "hidden_act"); act != "" && act != "quick_gelu" {
		return Qwen2VLVision{}, fmt.Errorf("config.json vision_config: hidden_act %q is not supported (want quick_gelu)", act)
	}
	if out, ok := format.MetaInt(vcm, "hidden_size"); ok && int(out) != v.TextHidden {
		return Qwen2VLVision{}, fmt.Errorf("config.json vision_config: hidden_size %d differs from the text model's %d", out, v.TextHidden)
	}
	return v, nil
}

// OpenAI CLIP's normalization, Qwen2-VL's default.
var (
	clipMean = [3]float32{0.48145466, 0.4578275, 0.40821073}
	clipStd  = [3]float32{0.26862954, 0.26130258, 0.27577711}
)

// meanStd reads image_mean and image_std of a preprocessor config (nil:
// leave them).
func meanStd(preproc map[string]any, mean, std *[3]float32) error {
	for i, key := range []string{"image_mean", "image_std"} {
		l, ok := format.List(preproc[key])
		if !ok {
			continue
		}
		if len(l) != 3 {
			return fmt.Errorf("preprocessor_config.json: %q has %d values, want 3", key, len(l))
		}
		for c, x := range l {
			f, ok := format.MetaFloat(map[string]any{"v": x}, "v")
			if !ok {
				return fmt.Errorf("preprocessor_config.json: %q holds %s", key, show(x))
			}
			if i == 0 {
				mean[c] = float32(f)
			} else {
				std[c] = float32(f)
			}
		}
	}
	return nil
}

// LoadQwen2VLPair reads a Qwen2-VL or Qwen2.5-VL model from llama.cpp's
// text GGUF (arch qwen2vl) and mmproj GGUF (projector qwen2vl_merger or
// qwen2.5vl_merger). The mmproj file
// holds q, k and v apart and the two frames of the patch convolution as
// two tensors; they are joined into the Hugging Face layout the graph
// reads. The FFN width is taken from the tensors (llama.cpp's converter
// writes the merger width as the feed-forward length). ImageTokenID is -1:
// the caller looks <|image_pad|> up in the vocabulary.
func LoadQwen2VLPair(text, mmproj format.Checkpoint) (*Qwen2VL, error) {
	if text.Format() != "gguf" || mmproj.Format() != "gguf" {
		return nil, errors.New("vision-language GGUF pair: both files must be GGUF")
	}
	m := mmproj.Metadata()
	if a, _ := format.MetaString(m, "general.architecture"); a != "clip" {
		return nil, fmt.Errorf("mmproj: general.architecture is %q, want clip", a)
	}
	if p, _ := format.MetaString(m, "clip.projector_type"); !isQwenVLProjector(p) {
		return nil, fmt.Errorf("mmproj: projector type %q is not supported here (want qwen2vl_merger or qwen2.5vl_merger)", p)
	}
	tm, err := Load(text)
	if err != nil {
		return nil, fmt.Errorf("text model: %w", err)
	}
	if tm.Config.Family != "qwen2vl" {
		return nil, fmt.Errorf("text model: family %s, a Qwen2-VL / Qwen2.5-VL projector needs a qwen2vl text model", tm.Config.Family)
	}
	v, w, err := LoadQwen2VLVisionMMProj(mmproj, tm.Config.Hidden)
	if err != nil {
		return nil, err
	}
	return &Qwen2VL{Text: tm, Vision: v, VisionWeights: w}, nil
}

// LoadQwen2VLVisionMMProj reads the vision encoder and merger of
// llama.cpp's mmproj GGUF (projector qwen2vl_merger, or qwen2.5vl_merger
// for Qwen2.5-VL) for a text model of width textHidden. ImageTokenID is
// -1: the file does not store it.
func LoadQwen2VLVisionMMProj(mmproj format.Checkpoint, textHidden int) (Qwen2VLVision, graph.Weights, error) {
	if mmproj.Format() != "gguf" {
		return Qwen2VLVision{}, nil, errors.New("mmproj: not a GGUF file")
	}
	m := mmproj.Metadata()
	if a, _ := format.MetaString(m, "general.architecture"); a != "clip" {
		return Qwen2VLVision{}, nil, fmt.Errorf("mmproj: general.architecture is %q, want clip", a)
	}
	proj, _ := format.MetaString(m, "clip.projector_type")
	if !isQwenVLProjector(proj) {
		return Qwen2VLVision{}, nil, fmt.Errorf("mmproj: projector type %q is not supported here (want qwen2vl_merger or qwen2.5vl_merger)", proj)
	}
	var gerr error
	get := func(key string, def int) int {
		v, ok := format.MetaInt(m, key)
		if !ok {
			if def < 0 && gerr == nil {
				gerr = fmt.Errorf("mmproj: %q is missing", key)
			}
			return def
		}
		return int(v)
	}
	v := Qwen2VLVision{PatchSize: get("clip.vision.patch_size", -1), TemporalPatch: 2,
		Merge: get("clip.vision.spatial_merge_size", 2), Channels: 3, Hidden: get("clip.vision.embedding_length", -1),
		Layers: get("clip.vision.block_count", -1), Heads: get("clip.vision.attention.head_count", -1),
		NormEps: floatOr(m, "clip.vision.attention.layer_norm_epsilon", 1e-6), RopeTheta: 10000,
		TextHidden: textHidden, ImageTokenID: -1}
	if gerr != nil {
		return Qwen2VLVision{}, nil, gerr
	}
	if info, ok := format.Find(mmproj, "v.blk.0.ffn_up.weight"); ok && len(info.Shape) == 2 {
		v.FFN = int(info.Shape[0])
	}
	if proj == qwen25vlProjector {
		if err := qwen25vlVisionMMProj(m, &v); err != nil {
			return Qwen2VLVision{}, nil, err
		}
	}
	if err := mmprojMeanStd(m, &v.Mean, &v.Std); err != nil {
		return Qwen2VLVision{}, nil, err
	}
	if err := v.Validate(); err != nil {
		return Qwen2VLVision{}, nil, err
	}
	g, err := BuildQwen2VLVision(&v)
	if err != nil {
		return Qwen2VLVision{}, nil, err
	}
	w, err := readQwen2VLMMProj(mmproj, g, &v)
	if err != nil {
		return Qwen2VLVision{}, nil, fmt.Errorf("mmproj: %w", err)
	}
	return v, w, nil
}

var qwen2vlMMProjNames = map[string]string{
	"norm1.weight": "ln1.weight", "norm1.bias": "ln1.bias",
	"norm2.weight": "ln2.weight", "norm2.bias": "ln2.bias",
	"attn.proj.weight": "attn_out.weight", "attn.proj.bias": "attn_out.bias",
	"mlp.fc1.weight": "ffn_up.weight", "mlp.fc1.bias": "ffn_up.bias",
	"mlp.fc2.weight": "ffn_down.weight", "mlp.fc2.bias": "ffn_down.bias",
	"mlp.gate_proj.weight": "ffn_gate.weight", "mlp.gate_proj.bias": "ffn_gate.bias",
	"mlp.up_proj.weight": "ffn_up.weight", "mlp.up_proj.bias": "ffn_up.bias",
	"mlp.down_proj.weight": "ffn_down.weight", "mlp.down_proj.bias": "ffn_down.bias",
}

// readQwen2VLMMProj reads the weights g names from a qwen2vl_merger
// mmproj file, joining q|k|v and the patch convolution's frames.
func readQwen2VLMMProj(ck format.Checkpoint, g *graph.Graph, v *Qwen2VLVision) (graph.Weights, error) {
	read := func(name string, n int) ([]float32, error) {
		if _, ok := format.Find(ck, name); !ok {
			return nil, fmt.Errorf("no tensor %q", name)
		}
		x, err := ck.ReadFloat32(name)
		if err != nil {
			return nil, fmt.Errorf("reading %q: %w", name, err)
		}
		if len(x) != n {
			return nil, fmt.Errorf("tensor %q holds %d values, the config implies %d", name, len(x), n)
		}
		for i, f := range x {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return nil, fmt.Errorf("tensor %q holds %v at index %d", name, f, i)
			}
		}
		return x, nil
	}
	w := graph.Weights{}
	for name, shape := range g.Weights {
		n := 1
		for _, d := range shape {
			n *= d
		}
		var x []float32
		var err error
		switch {
		case name == "visual.patch_embed.proj.weight":
			x, err = readFrames(read, v, n)
		case name == "visual.merger.ln_q.weight", name == "visual.merger.ln_q.bias":
			x, err = read("v.post_ln."+strings.TrimPrefix(name, "visual.merger.ln_q."), n)
		case strings.HasPrefix(name, "visual.merger.mlp."):
			x, err = read("mm."+strings.TrimPrefix(name, "visual.merger.mlp."), n)
		default:
			rest, ok := strings.CutPrefix(name, "visual.blocks.")
			num, tail, _ := strings.Cut(rest, ".")
			if !ok {
				return nil, fmt.Errorf("no mmproj name for %q", name)
			}
			pre := "v.blk." + num + "."
			switch tail {
			case "attn.qkv.weight", "attn.qkv.bias":
				kind := strings.TrimPrefix(tail, "attn.qkv.")
				for _, part := range []string{"attn_q.", "attn_k.", "attn_v."} {
					y, e := read(pre+part+kind, n/3)
					if e != nil {
						return nil, e
					}
					x = append(x, y...)
				}
			default:
				t, ok := qwen2vlMMProjNames[tail]
				if !ok {
					return nil, fmt.Errorf("no mmproj name for %q", name)
				}
				x, err = read(pre+t, n)
			}
		}
		if err != nil {
			return nil, err
		}
		w[name] = x
	}
	return w, nil
}

// readFrames joins llama.cpp's per-frame patch convolution weights
// v.patch_embd.weight, v.patch_embd.weight.1, ... (each [N][C][P][P])
// into the Conv3d's [N][C][frame][P][P].
func readFrames(read func(string, int) ([]float32, error), v *Qwen2VLVision, n int) ([]float32, error) {
	PP, C, Tp := v.PatchSize*v.PatchSize, v.Channels, v.TemporalPatch
	out := make([]float32, n)
	N := n / (C * Tp * PP)
	for t := 0; t < Tp; t++ {
		name := "v.patch_embd.weight"
		if t > 0 {
			name += fmt.Sprintf(".%d", t)
		}
		f, err := read(name, N*C*PP)
		if err != nil {
			return nil, err
		}
		for o := 0; o < N; o++ {
			for c := 0; c < C; c++ {
				copy(out[((o*C+c)*Tp+t)*PP:][:PP], f[(o*C+c)*PP:][:PP])
			}
		}
	}
	return out, nil
}
