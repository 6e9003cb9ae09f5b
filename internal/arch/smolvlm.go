package arch

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
)

// SmolVLM / Idefics3 vision-language models: a SigLIP vision encoder
// (patch convolution as a matmul over flattened patches, learned position
// embeddings, pre-norm blocks of bidirectional attention and a GELU-tanh
// MLP, a final LayerNorm), a pixel shuffle that joins each s x s block of
// patch outputs into one row, a bias-free linear connector to the text
// width, and a Llama text model that reads those rows in place of the
// <image> tokens.

// The text model alone is the "smolvlm" family: loading, compiling and
// running a SmolVLM folder without images uses it; LoadVLM adds the
// vision encoder.
func init() {
	register(&Family{
		Name:            "smolvlm",
		HFArchitectures: []string{"SmolVLMForConditionalGeneration", "Idefics3ForConditionalGeneration"},
		HFModelTypes:    []string{"smolvlm", "idefics3"},
		configHF:        smolvlmTextConfigHF,
		tensorNames:     smolvlmTensorName,
		build:           buildDecoder,
	})
	registerVision(&VisionFamily{Name: Idefics3VisionFamily, IsHF: isSmolVLM, Projectors: []string{"idefics3"}})
}

// Idefics3VisionFamily is the vision family of SmolVLM / Idefics3 models.
const Idefics3VisionFamily = "idefics3"

// smolvlmTextConfigHF reads config.json's text_config as a Llama config.
func smolvlmTextConfigHF(m map[string]any) (Config, error) {
	tc, ok := m["text_config"].(map[string]any)
	if !ok {
		return Config{}, errors.New("config.json: \"text_config\" is missing")
	}
	c, err := llamaConfigHF(tc)
	if err != nil {
		return c, fmt.Errorf("config.json text_config: %w", err)
	}
	c.Family = "smolvlm"
	return c, nil
}

// smolvlmTensorName maps the text model's canonical names under
// model.text_model.
func smolvlmTensorName(source, name string) (string, bool) {
	if source != "hf" {
		return "", false
	}
	if rest, ok := strings.CutPrefix(name, "model."); ok {
		return "model.text_model." + rest, true
	}
	return name, true
}

// VisionConfig describes a SigLIP encoder and its Idefics3 connector.
type VisionConfig struct {
	ImageSize   int     `json:"image_size"` // side of the square the encoder reads
	PatchSize   int     `json:"patch_size"`
	Channels    int     `json:"num_channels"`
	Hidden      int     `json:"hidden_size"`
	FFN         int     `json:"intermediate_size"`
	Layers      int     `json:"num_layers"`
	Heads       int     `json:"num_heads"`
	NormEps     float64 `json:"norm_eps"`
	ScaleFactor int     `json:"scale_factor"` // pixel shuffle block side s
	TextHidden  int     `json:"text_hidden_size"`
	// Mean and Std normalize the u8/255 pixels per channel.
	Mean [3]float32 `json:"image_mean"`
	Std  [3]float32 `json:"image_std"`
	// LongestEdge is the side the image's longest edge is resized to
	// before it is cut into ImageSize tiles.
	LongestEdge  int `json:"longest_edge"`
	ImageTokenID int `json:"image_token_id"`
}

// Grid is the number of patches along a side.
func (v *VisionConfig) Grid() int { return v.ImageSize / v.PatchSize }

// TokensPerImage is the number of embedding rows one tile gives.
func (v *VisionConfig) TokensPerImage() int {
	g := v.Grid() / v.ScaleFactor
	return g * g
}

// Validate checks the sizes fit together.
func (v *VisionConfig) Validate() error {
	switch {
	case v.ImageSize <= 0 || v.PatchSize <= 0 || v.ImageSize%v.PatchSize != 0:
		return fmt.Errorf("vision: image size %d is not a positive multiple of patch size %d", v.ImageSize, v.PatchSize)
	case v.Channels != 3:
		return fmt.Errorf("vision: %d channels, want 3", v.Channels)
	case v.Hidden <= 0 || v.FFN <= 0 || v.Layers <= 0 || v.Heads <= 0 || v.Hidden%v.Heads != 0:
		return fmt.Errorf("vision: hidden %d, ffn %d, %d layers, %d heads do not fit", v.Hidden, v.FFN, v.Layers, v.Heads)
	case v.ScaleFactor <= 0 || v.Grid()%v.ScaleFactor != 0:
		return fmt.Errorf("vision: scale factor %d does not divide the %d-patch grid", v.ScaleFactor, v.Grid())
	case v.TextHidden <= 0:
		return fmt.Errorf("vision: text width %d", v.TextHidden)
	case v.LongestEdge < v.ImageSize:
		return fmt.Errorf("vision: longest edge %d is below the image size %d", v.LongestEdge, v.ImageSize)
	}
	for c := range v.Std {
		if v.Std[c] == 0 {
			return errors.New("vision: image_std holds a zero")
		}
	}
	return nil
}

// VLM is a vision-language model: a text model and a vision encoder with
// their weights under canonical names.
type VLM struct {
	Text          *Model
	Vision        VisionConfig
	VisionWeights graph.Weights
}

// isSmolVLM reports whether a checkpoint's metadata names a
// vision-language architecture aotlm reads with LoadVLM.
func isSmolVLM(meta map[string]any) bool {
	archs, _ := format.MetaStrings(meta, "architectures")
	for _, a := range archs {
		if a == "SmolVLMForConditionalGeneration" || a == "Idefics3ForConditionalGeneration" {
			return true
		}
	}
	mt, _ := format.MetaString(meta, "model_type")
	return mt == "smolvlm" || mt == "idefics3"
}

// LoadVLM reads a SmolVLM / Idefics3 checkpoint in Hugging Face layout.
// preproc is the parsed preprocessor_config.json (nil for its defaults:
// mean and std 0.5, longest edge the encoder's image size).
func LoadVLM(ck format.Checkpoint, preproc map[string]any) (*VLM, error) {
	if ck.Format() != "safetensors" {
		return nil, fmt.Errorf("vision-language models load from Hugging Face folders; %s is not supported yet", ck.Format())
	}
	meta := ck.Metadata()
	if !isSmolVLM(meta) {
		return nil, errors.New("config.json: not a SmolVLM / Idefics3 model")
	}
	vcm, ok := meta["vision_config"].(map[string]any)
	if !ok {
		return nil, errors.New("config.json: \"vision_config\" is missing")
	}
	text, err := smolvlmTextConfigHF(meta)
	if err != nil {
		return nil, err
	}
	vc, err := visionConfigHF(meta, vcm, preproc)
	if err != nil {
		return nil, err
	}
	vc.TextHidden = text.Hidden
	if err := vc.Validate(); err != nil {
		return nil, err
	}
	if err := text.Validate(); err != nil {
		return nil, fmt.Errorf("text model: %w", err)
	}
	tg, err := buildDecoder(&text, BuildOptions{AllLogits: true})
	if err != nil {
		return nil, err
	}
	tw, err := readWeights(ck, tg, func(name string) string {
		s, _ := smolvlmTensorName("hf", name)
		return s
	})
	if err != nil {
		return nil, err
	}
	vg, err := BuildVision(&vc)
	if err != nil {
		return nil, err
	}
	vw, err := readWeights(ck, vg, func(name string) string { return name })
	if err != nil {
		return nil, err
	}
	return &VLM{Text: &Model{Config: text, Weights: tw}, Vision: vc, VisionWeights: vw}, nil
}

func visionConfigHF(top, m, preproc map[string]any) (VisionConfig, error) {
	var err error
	get := func(key string, def int) int {
		v, ok := format.MetaInt(m, key)
		if !ok {
			if def < 0 && err == nil {
				err = fmt.Errorf("config.json vision_config: %q is missing or not an integer", key)
			}
			return def
		}
		return int(v)
	}
	v := VisionConfig{
		ImageSize: get("image_size", -1), PatchSize: get("patch_size", -1), Channels: get("num_channels", 3),
		Hidden: get("hidden_size", -1), FFN: get("intermediate_size", -1), Layers: get("num_hidden_layers", -1),
		Heads: get("num_attention_heads", -1), NormEps: floatOr(m, "layer_norm_eps", 1e-6),
		Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5},
	}
	if err != nil {
		return v, err
	}
	if act, _ := format.MetaString(m, "hidden_act"); act != "" && act != "gelu_pytorch_tanh" && act != "gelu_new" {
		return v, fmt.Errorf("config.json vision_config: hidden_act %q is not supported (want gelu_pytorch_tanh)", act)
	}
	v.ScaleFactor = 2
	if s, ok := format.MetaInt(top, "scale_factor"); ok {
		v.ScaleFactor = int(s)
	}
	v.ImageTokenID = -1
	if id, ok := format.MetaInt(top, "image_token_id"); ok {
		v.ImageTokenID = int(id)
	}
	v.LongestEdge = v.ImageSize
	if preproc != nil {
		for i, key := range []string{"image_mean", "image_std"} {
			l, ok := format.List(preproc[key])
			if !ok {
				continue
			}
			if len(l) != 3 {
				return v, fmt.Errorf("preprocessor_config.json: %q has %d values, want 3", key, len(l))
			}
			for c, x := range l {
				f, ok := x.(float64)
				if !ok {
					return v, fmt.Errorf("preprocessor_config.json: %q holds %v", key, x)
				}
				if i == 0 {
					v.Mean[c] = float32(f)
				} else {
					v.Std[c] = float32(f)
				}
			}
		}
		if sz, ok := preproc["size"].(map[string]any); ok {
			if le, ok := format.MetaInt(sz, "longest_edge"); ok {
				v.LongestEdge = int(le)
			}
		}
	}
	return v, nil
}

// readWeights reads every weight g declares from ck, naming each through
// src, checking the element count (the patch convolution [N, C, P, P] is
// read as the [N, C*P*P] matrix it is in memory).
func readWeights(ck format.Checkpoint, g *graph.Graph, src func(string) string) (graph.Weights, error) {
	w := graph.Weights{}
	for name, shape := range g.Weights {
		s := src(name)
		info, ok := format.Find(ck, s)
		if !ok {
			return nil, fmt.Errorf("%s checkpoint has no tensor %q", ck.Format(), s)
		}
		want, got := int64(1), int64(1)
		for _, d := range shape {
			want *= int64(d)
		}
		for _, d := range info.Shape {
			got *= d
		}
		if got != want || len(info.Shape) == 0 || info.Shape[0] != int64(shape[0]) {
			return nil, fmt.Errorf("tensor %q has shape %v, the config implies %v", s, info.Shape, shape)
		}
		v, err := ck.ReadFloat32(s)
		if err != nil {
			return nil, fmt.Errorf("reading %q: %w", s, err)
		}
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("tensor %q holds %v at index %d", s, x, i)
			}
		}
		w[name] = v
	}
	return w, nil
}

// BuildVision returns the graph from flattened patches to text-width
// image embeddings. It reads T = Grid()^2 rows of C*P*P pixels (op.Rows,
// in the order PatchOrder gives) and T position ids (the token input), and
// outputs T/s^2 rows of TextHidden: the pixel shuffle is a grouping of s^2
// consecutive rows, because the patches come in s x s block order and
// nothing in the encoder depends on row order but the position ids.
func BuildVision(v *VisionConfig) (*graph.Graph, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	g := graph.New()
	const pre = "model.vision_model."
	eps := float32(v.NormEps)
	pos := g.Tokens()
	pix := g.Rows(v.Channels * v.PatchSize * v.PatchSize)
	x := g.Linear(pix, pre+"embeddings.patch_embedding.weight", v.Hidden, pre+"embeddings.patch_embedding.bias")
	x = g.Add(x, g.Embed(pos, pre+"embeddings.position_embedding.weight", v.Grid()*v.Grid(), v.Hidden))
	E := v.Hidden / v.Heads
	for l := 0; l < v.Layers; l++ {
		p := fmt.Sprintf("%sencoder.layers.%d.", pre, l)
		h := g.LayerNorm(x, p+"layer_norm1.weight", p+"layer_norm1.bias", eps)
		q := g.Linear(h, p+"self_attn.q_proj.weight", v.Hidden, p+"self_attn.q_proj.bias")
		k := g.Linear(h, p+"self_attn.k_proj.weight", v.Hidden, p+"self_attn.k_proj.bias")
		val := g.Linear(h, p+"self_attn.v_proj.weight", v.Hidden, p+"self_attn.v_proj.bias")
		a := g.Attention(q, k, val, graph.Attn{Layer: l, Heads: v.Heads, KVHeads: v.Heads, HeadDim: E,
			Scale: float32(1 / math.Sqrt(float64(E))), Bidirectional: true})
		x = g.Add(x, g.Linear(a, p+"self_attn.out_proj.weight", v.Hidden, p+"self_attn.out_proj.bias"))
		h = g.LayerNorm(x, p+"layer_norm2.weight", p+"layer_norm2.bias", eps)
		m := g.GELUTanh(g.Linear(h, p+"mlp.fc1.weight", v.FFN, p+"mlp.fc1.bias"))
		x = g.Add(x, g.Linear(m, p+"mlp.fc2.weight", v.Hidden, p+"mlp.fc2.bias"))
	}
	x = g.LayerNorm(x, pre+"post_layernorm.weight", pre+"post_layernorm.bias", eps)
	s2 := v.ScaleFactor * v.ScaleFactor
	x = g.GroupRows(x, s2)
	g.SetOutput(g.Linear(x, "model.connector.modality_projection.proj.weight", v.TextHidden, ""))
	return g, nil
}

// PatchOrder returns the patch indices (row-major in the Grid x Grid
// patch grid, which are also the position ids) in the order the encoder
// graph reads them: s x s blocks in row-major order, each block's patches
// with dy outer and dx inner, so that grouping s^2 consecutive output rows
// is Idefics3's pixel shuffle.
func (v *VisionConfig) PatchOrder() []int {
	return shuffleOrder(v.Grid(), v.ScaleFactor)
}

// Patches flattens a normalized [C][S][S] tile into the encoder's input
// rows in PatchOrder, each row the patch's C*P*P values (channel, then
// row, then column: the layout of the patch convolution's weight).
func (v *VisionConfig) Patches(pix []float32) ([]float32, []int, error) {
	S, P, C := v.ImageSize, v.PatchSize, v.Channels
	if len(pix) != C*S*S {
		return nil, nil, fmt.Errorf("vision: tile holds %d values, want %dx%dx%d", len(pix), C, S, S)
	}
	order := v.PatchOrder()
	n := v.Grid()
	K := C * P * P
	rows := make([]float32, len(order)*K)
	for r, idx := range order {
		py, px := idx/n, idx%n
		row := rows[r*K : (r+1)*K]
		for c := 0; c < C; c++ {
			for ky := 0; ky < P; ky++ {
				src := pix[c*S*S+(py*P+ky)*S+px*P:]
				copy(row[c*P*P+ky*P:c*P*P+(ky+1)*P], src[:P])
			}
		}
	}
	return rows, order, nil
}

// LoadVLMPair reads a SmolVLM / Idefics3 model from llama.cpp's pair of
// GGUF files: the text model and the "mmproj" file holding the vision
// encoder and projector (projector type idefics3). The image token id is
// not stored there: ImageTokenID is -1 until the caller looks "<image>"
// up in the vocabulary.
func LoadVLMPair(text, mmproj format.Checkpoint) (*VLM, error) {
	if text.Format() != "gguf" || mmproj.Format() != "gguf" {
		return nil, errors.New("vision-language GGUF pair: both files must be GGUF")
	}
	tm, err := Load(text)
	if err != nil {
		return nil, fmt.Errorf("text model: %w", err)
	}
	vc, vw, err := LoadVisionMMProj(mmproj, tm.Config.Hidden)
	if err != nil {
		return nil, err
	}
	return &VLM{Text: tm, Vision: vc, VisionWeights: vw}, nil
}

var mmprojNames = map[string]string{
	"layer_norm1.weight": "ln1.weight", "layer_norm1.bias": "ln1.bias",
	"layer_norm2.weight": "ln2.weight", "layer_norm2.bias": "ln2.bias",
	"self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_proj.bias": "attn_q.bias",
	"self_attn.k_proj.weight": "attn_k.weight", "self_attn.k_proj.bias": "attn_k.bias",
	"self_attn.v_proj.weight": "attn_v.weight", "self_attn.v_proj.bias": "attn_v.bias",
	"self_attn.out_proj.weight": "attn_out.weight", "self_attn.out_proj.bias": "attn_out.bias",
	"mlp.fc1.weight": "ffn_up.weight", "mlp.fc1.bias": "ffn_up.bias",
	"mlp.fc2.weight": "ffn_down.weight", "mlp.fc2.bias": "ffn_down.bias",
}

// mmprojName maps a canonical vision tensor name to llama.cpp's mmproj
// name.
func mmprojName(name string) string {
	switch name {
	case "model.vision_model.embeddings.patch_embedding.weight":
		return "v.patch_embd.weight"
	case "model.vision_model.embeddings.patch_embedding.bias":
		return "v.patch_embd.bias"
	case "model.vision_model.embeddings.position_embedding.weight":
		return "v.position_embd.weight"
	case "model.vision_model.post_layernorm.weight":
		return "v.post_ln.weight"
	case "model.vision_model.post_layernorm.bias":
		return "v.post_ln.bias"
	case "model.connector.modality_projection.proj.weight":
		return "mm.model.fc.weight"
	}
	rest, ok := strings.CutPrefix(name, "model.vision_model.encoder.layers.")
	if !ok {
		return name
	}
	num, tail, _ := strings.Cut(rest, ".")
	if v, ok := mmprojNames[tail]; ok {
		return "v.blk." + num + "." + v
	}
	return name
}

// shuffleOrder is the patch order of a pixel shuffle by s over an n x n
// grid: s x s blocks in row-major order, each block's patches with dy
// outer and dx inner, as row-major indices of the grid.
func shuffleOrder(n, s int) []int {
	order := make([]int, 0, n*n)
	for bi := 0; bi < n/s; bi++ {
		for bj := 0; bj < n/s; bj++ {
			for dy := 0; dy < s; dy++ {
				for dx := 0; dx < s; dx++ {
					order = append(order, (bi*s+dy)*n+bj*s+dx)
				}
			}
		}
	}
	return order
}
