package arch

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/tensor"
)

// InternVL (InternVL2.5 / InternVL3 in OpenGVLab's published layout,
// InternVLChatModel): an InternViT encoder over fixed-size tiles (a patch
// convolution with a bias, a class token and learned position
// embeddings, pre-norm blocks of bidirectional attention and a GELU MLP
// whose outputs are scaled per channel by ls1 / ls2 before the residual
// add, no final norm), the class token dropped, a pixel shuffle that joins
// each 2x2 block of patches into one row, and mlp1 (LayerNorm, Linear,
// GELU, Linear) to the width of a Qwen2 text model that reads those rows
// in place of the <IMG_CONTEXT> tokens.
//
// Hugging Face's InternViT puts the class token first and gives it
// position row 0 (patch k gets row k+1); llama.cpp's mtmd appends it
// after the patches and adds the rows in storage order (patch k gets row
// k, the class token the last). InternVLVision.LlamaCpp selects mtmd's
// order (and its tile grid, vision.InternVL); the default is Hugging
// Face's, which the models were trained with.

// The text model alone is the "internvl" family: loading, compiling and
// running an InternVL folder without images uses it; LoadInternVL adds
// the vision encoder.
func init() {
	register(&Family{
		Name:            "internvl",
		HFArchitectures: []string{internvlArchitecture},
		HFModelTypes:    []string{internvlModelType},
		configHF:        internvlTextConfigHF,
		tensorNames:     internvlTensorName,
		build:           buildDecoder,
	})
	registerVision(&VisionFamily{Name: InternVLVisionFamily, IsHF: isInternVL, Projectors: []string{internvlProjector}})
	// its Qwen2.5 language model may ask for YaRN as qwen2 does
	yarnFamilies["internvl"] = true
}

// InternVLVisionFamily is the vision family of InternVL models.
const InternVLVisionFamily = "internvl"

const (
	internvlArchitecture = "InternVLChatModel"
	internvlModelType    = "internvl_chat"
	internvlProjector    = "internvl"
)

// isInternVL reports whether config.json metadata names an InternVL
// model.
func isInternVL(meta map[string]any) bool {
	archs, _ := format.MetaStrings(meta, "architectures")
	for _, a := range archs {
		if a == internvlArchitecture {
			return true
		}
	}
	mt, _ := format.MetaString(meta, "model_type")
	return mt == internvlModelType
}

// internvlTextConfigHF reads config.json's llm_config as a Qwen2 config
// (InternVL2.5 and InternVL3 of 1B to 78B but 9B use Qwen2 / Qwen2.5).
func internvlTextConfigHF(m map[string]any) (Config, error) {
	tc, ok := m["llm_config"].(map[string]any)
	if !ok {
		return Config{}, errors.New("config.json: \"llm_config\" is missing")
	}
	archs, _ := format.MetaStrings(tc, "architectures")
	mt, _ := format.MetaString(tc, "model_type")
	if !(len(archs) > 0 && archs[0] == "Qwen2ForCausalLM") && mt != "qwen2" {
		return Config{}, fmt.Errorf("config.json llm_config: %v (model_type %q) is not supported; InternVL runs with a Qwen2 text model", archs, mt)
	}
	c, err := decoderConfigHF(tc, "internvl", graph.RopeHalf)
	if err != nil {
		return c, fmt.Errorf("config.json llm_config: %w", err)
	}
	c.QKVBias = true
	return c, nil
}

// internvlTensorName maps the text model's canonical names under
// language_model.
func internvlTensorName(source, name string) (string, bool) {
	if source != "hf" {
		return "", false
	}
	return "language_model." + name, true
}

// InternVLVision describes an InternViT encoder and its mlp1 projector,
// with the tiling of its images.
type InternVLVision struct {
	ImageSize int     `json:"image_size"` // side of the square tile the encoder reads
	PatchSize int     `json:"patch_size"`
	Channels  int     `json:"num_channels"`
	Hidden    int     `json:"hidden_size"`
	FFN       int     `json:"intermediate_size"`
	Layers    int     `json:"num_layers"`
	Heads     int     `json:"num_heads"`
	NormEps   float64 `json:"norm_eps"` // the encoder's LayerNorms
	// ProjNormEps is mlp1's LayerNorm epsilon (PyTorch's default 1e-5).
	ProjNormEps float64 `json:"proj_norm_eps"`
	// ScaleFactor is the pixel shuffle's block side, 1/downsample_ratio.
	ScaleFactor int `json:"scale_factor"`
	TextHidden  int `json:"text_hidden_size"`
	// Mean and Std normalize the u8/255 pixels per channel.
	Mean [3]float32 `json:"image_mean"`
	Std  [3]float32 `json:"image_std"`
	// MinTiles and MaxTiles bound the number of tiles of the grid an image
	// is cut into; Thumbnail adds the whole image as one more tile when
	// the grid has more than one.
	MinTiles  int  `json:"min_tiles"`
	MaxTiles  int  `json:"max_tiles"`
	Thumbnail bool `json:"use_thumbnail"`
	// ImageTokenID is <IMG_CONTEXT>'s id; -1 when the checkpoint does not
	// say (InternVL's config never does; it is looked up).
	ImageTokenID int `json:"image_token_id"`
	// LlamaCpp follows llama.cpp's mtmd where it departs from Hugging
	// Face's InternVL: the class token's position row after the patches'
	// (InternVLPositions) and the tile grid of LLaVA-NeXT's
	// best-resolution rule with the overview always added
	// (vision.InternVL). Off: Hugging Face's choices. With it the encoder
	// also mirrors the binary16 steps of mtmd's CPU backend, the rest of
	// the difference between the two: the patch convolution reads its
	// pixels and weights rounded to binary16, as its F16 im2col does
	// (Rows, EncoderWeights), and GELU goes through its binary16 table
	// (op gelu_f16).
	LlamaCpp bool `json:"llama_cpp,omitempty"`
}

// Grid is the number of patches along a tile's side.
func (v *InternVLVision) Grid() int { return v.ImageSize / v.PatchSize }

// TokensPerTile is the number of embedding rows one tile gives.
func (v *InternVLVision) TokensPerTile() int {
	g := v.Grid() / v.ScaleFactor
	return g * g
}

// PatchCols is the width of one input row: C*P*P pixel values.
func (v *InternVLVision) PatchCols() int { return v.Channels * v.PatchSize * v.PatchSize }

// Validate checks the sizes fit together.
func (v *InternVLVision) Validate() error {
	switch {
	case v.ImageSize <= 0 || v.PatchSize <= 0 || v.ImageSize%v.PatchSize != 0 || v.ImageSize > 4096:
		return fmt.Errorf("internvl vision: image size %d is not a positive multiple of patch size %d", v.ImageSize, v.PatchSize)
	case v.Channels != 3:
		return fmt.Errorf("internvl vision: %d channels, want 3", v.Channels)
	case v.Hidden <= 0 || v.FFN <= 0 || v.Layers <= 0 || v.Heads <= 0 || v.Hidden%v.Heads != 0:
		return fmt.Errorf("internvl vision: hidden %d, ffn %d, %d layers, %d heads do not fit", v.Hidden, v.FFN, v.Layers, v.Heads)
	case v.ScaleFactor <= 0 || v.Grid()%v.ScaleFactor != 0:
		return fmt.Errorf("internvl vision: pixel shuffle of %d does not divide the %d-patch grid", v.ScaleFactor, v.Grid())
	case v.TextHidden <= 0:
		return fmt.Errorf("internvl vision: text width %d", v.TextHidden)
	case !(v.NormEps > 0 && v.NormEps < 1) || !(v.ProjNormEps > 0 && v.ProjNormEps < 1):
		return fmt.Errorf("internvl vision: norm epsilons %v, %v", v.NormEps, v.ProjNormEps)
	case v.MinTiles < 1 || v.MaxTiles < v.MinTiles || v.MaxTiles > 64:
		return fmt.Errorf("internvl vision: %d to %d tiles", v.MinTiles, v.MaxTiles)
	}
	for c := range v.Std {
		if v.Std[c] == 0 {
			return errors.New("internvl vision: image_std holds a zero")
		}
	}
	return nil
}

// Canonical names of the weights the InternVL encoder graph reads that
// are not a checkpoint's tensors as stored: the position table
// (InternVLPositions) and the output projections scaled by ls1 / ls2.
const (
	internvlPre      = "vision_model."
	internvlPosTable = internvlPre + "embeddings.position_table"
	internvlPatch    = internvlPre + "embeddings.patch_embedding.weight"
)

// internvlLayer is the canonical prefix of encoder layer l.
func internvlLayer(l int) string { return fmt.Sprintf("%sencoder.layers.%d.", internvlPre, l) }

// BuildInternVLVision returns the graph from one tile's rows to its
// text-width image embeddings. It reads 1 + Grid()^2 rows of PatchCols()
// values (op.Rows): a row of zeros for the class token first, then the
// patches in the order PatchOrder gives; and each row's id in the
// position table (InternVLPositions). The class token's row is dropped
// after the encoder (group_rows skips it), and each ScaleFactor^2
// consecutive patch rows join into one (the pixel shuffle), so it outputs
// TokensPerTile() rows of TextHidden.
//
// The position table holds each position row plus the patch
// convolution's bias (the patch rows), then each position row plus the
// class embedding (the class token's row), so the convolution is a
// matmul without a bias and the zero row of the class token becomes its
// embedding. ls1 and ls2 are folded into the attention output and fc2
// projections. Hugging Face's GELU is the exact (erf) one; this uses the
// tanh approximation, as llama.cpp does (they differ by ~1e-3 here), and
// with LlamaCpp llama.cpp's binary16 table of it (op gelu_f16).
func BuildInternVLVision(v *InternVLVision) (*graph.Graph, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	g := graph.New()
	eps := float32(v.NormEps)
	N := v.Grid() * v.Grid()
	ids := g.Tokens()
	x := g.Linear(g.Rows(v.PatchCols()), internvlPatch, v.Hidden, "")
	x = g.Add(x, g.Embed(ids, internvlPosTable, 2*(N+1), v.Hidden))
	E := v.Hidden / v.Heads
	gelu := g.GELUTanh
	if v.LlamaCpp {
		gelu = g.GELUF16
	}
	for l := 0; l < v.Layers; l++ {
		p := internvlLayer(l)
		h := g.LayerNorm(x, p+"norm1.weight", p+"norm1.bias", eps)
		qkv := g.Linear(h, p+"attn.qkv.weight", 3*v.Hidden, p+"attn.qkv.bias")
		q, k, val := g.Columns(qkv, 0, v.Hidden), g.Columns(qkv, v.Hidden, 2*v.Hidden), g.Columns(qkv, 2*v.Hidden, 3*v.Hidden)
		a := g.Attention(q, k, val, graph.Attn{Layer: l, Heads: v.Heads, KVHeads: v.Heads, HeadDim: E,
			Scale: float32(1 / math.Sqrt(float64(E))), Bidirectional: true})
		x = g.Add(x, g.Linear(a, p+"attn.proj_ls1.weight", v.Hidden, p+"attn.proj_ls1.bias"))
		h = g.LayerNorm(x, p+"norm2.weight", p+"norm2.bias", eps)
		m := gelu(g.Linear(h, p+"mlp.fc1.weight", v.FFN, p+"mlp.fc1.bias"))
		x = g.Add(x, g.Linear(m, p+"mlp.fc2_ls2.weight", v.Hidden, p+"mlp.fc2_ls2.bias"))
	}
	s2 := v.ScaleFactor * v.ScaleFactor
	x = g.GroupRowsAfter(x, 1, s2)
	x = g.LayerNorm(x, "mlp1.0.weight", "mlp1.0.bias", float32(v.ProjNormEps))
	x = gelu(g.Linear(x, "mlp1.1.weight", v.TextHidden, "mlp1.1.bias"))
	g.SetOutput(g.Linear(x, "mlp1.3.weight", v.TextHidden, "mlp1.3.bias"))
	return g, nil
}

// PatchOrder returns the patch indices (row-major in the Grid x Grid
// patch grid) in the order the encoder graph reads them after the class
// token: ScaleFactor x ScaleFactor blocks in row-major order, each
// block's patches with dy outer and dx inner, so that grouping
// consecutive rows is InternVL's pixel shuffle (ps_version v2).
func (v *InternVLVision) PatchOrder() []int {
	return shuffleOrder(v.Grid(), v.ScaleFactor)
}

// InternVLPositions returns the position table ids of the encoder's
// rows (the class token's, then the patches' in PatchOrder). With
// llamaCpp the patch at grid index k takes position row k and the class
// token row N (mtmd's order); without, the class token takes row 0 and
// patch k row k+1 (Hugging Face's). Rows 0..N of the table carry the
// patch bias, rows N+1.. the class embedding.
func (v *InternVLVision) InternVLPositions() []int {
	N := v.Grid() * v.Grid()
	off, cls := 1, 0
	if v.LlamaCpp {
		off, cls = 0, N
	}
	ids := make([]int, 0, N+1)
	ids = append(ids, N+1+cls)
	for _, k := range v.PatchOrder() {
		ids = append(ids, k+off)
	}
	return ids
}

// Rows flattens a normalized [C][S][S] tile into the encoder's input: a
// zero row for the class token, then each patch's C*P*P values in
// PatchOrder (channel, then row, then column: the layout of the patch
// convolution's weight). It returns the rows and their position ids.
func (v *InternVLVision) Rows(pix []float32) ([]float32, []int, error) {
	S, P, C := v.ImageSize, v.PatchSize, v.Channels
	if len(pix) != C*S*S {
		return nil, nil, fmt.Errorf("internvl vision: tile holds %d values, want %dx%dx%d", len(pix), C, S, S)
	}
	n, K := v.Grid(), v.PatchCols()
	order := v.PatchOrder()
	rows := make([]float32, (len(order)+1)*K)
	for r, idx := range order {
		py, px := idx/n, idx%n
		row := rows[(r+1)*K : (r+2)*K]
		for c := 0; c < C; c++ {
			for ky := 0; ky < P; ky++ {
				src := pix[c*S*S+(py*P+ky)*S+px*P:]
				copy(row[c*P*P+ky*P:c*P*P+(ky+1)*P], src[:P])
			}
		}
	}
	if v.LlamaCpp {
		roundF16(rows)
	}
	return rows, v.InternVLPositions(), nil
}

// roundF16 rounds each value of x to the nearest binary16.
func roundF16(x []float32) {
	for i, f := range x {
		x[i] = tensor.F16ToF32(tensor.F32ToF16(f))
	}
}

// EncoderWeights returns the weights the encoder graph runs with for v
// from those its loaders read: with LlamaCpp the patch convolution's
// weight rounded to binary16 (a copy; w is not changed), else w.
func (v *InternVLVision) EncoderWeights(w graph.Weights) graph.Weights {
	if !v.LlamaCpp {
		return w
	}
	out := make(graph.Weights, len(w))
	for name, x := range w {
		out[name] = x
	}
	patch := append([]float32(nil), w[internvlPatch]...)
	roundF16(patch)
	out[internvlPatch] = patch
	return out
}

// InternVL is a loaded InternVL model.
type InternVL struct {
	Text          *Model
	Vision        InternVLVision
	VisionWeights graph.Weights
}

// LoadInternVL reads an InternVL checkpoint in Hugging Face layout
// (vision_model.*, mlp1.*, language_model.*). preproc is the parsed
// preprocessor_config.json (nil for ImageNet's mean and std).
func LoadInternVL(ck format.Checkpoint, preproc map[string]any) (*InternVL, error) {
	if ck.Format() != "safetensors" {
		return nil, fmt.Errorf("InternVL loads from Hugging Face folders or a GGUF pair; %s is not supported", ck.Format())
	}
	tm, err := Load(ck)
	if err != nil {
		return nil, fmt.Errorf("text model: %w", err)
	}
	v, w, err := LoadInternVLVisionHF(ck, preproc, tm.Config.Hidden)
	if err != nil {
		return nil, err
	}
	return &InternVL{Text: tm, Vision: v, VisionWeights: w}, nil
}

// ImageNet's normalization, InternVL's.
var (
	imagenetMean = [3]float32{0.485, 0.456, 0.406}
	imagenetStd  = [3]float32{0.229, 0.224, 0.225}
)

// LoadInternVLVisionHF reads the vision encoder and mlp1 of an InternVL
// checkpoint in Hugging Face layout (not its text model), for a text
// model of width textHidden; preproc is the parsed
// preprocessor_config.json or nil.
func LoadInternVLVisionHF(ck format.Checkpoint, preproc map[string]any, textHidden int) (InternVLVision, graph.Weights, error) {
	meta := ck.Metadata()
	if !isInternVL(meta) {
		return InternVLVision{}, nil, errors.New("config.json: not an InternVL model")
	}
	vcm, ok := meta["vision_config"].(map[string]any)
	if !ok {
		return InternVLVision{}, nil, errors.New("config.json: \"vision_config\" is missing")
	}
	var gerr error
	get := func(m map[string]any, key string, def int) int {
		n, ok := format.MetaInt(m, key)
		if !ok {
			if def < 0 && gerr == nil {
				gerr = fmt.Errorf("config.json: %q is missing or not an integer", key)
			}
			return def
		}
		return int(n)
	}
	v := InternVLVision{ImageSize: get(vcm, "image_size", -1), PatchSize: get(vcm, "patch_size", -1),
		Channels: get(vcm, "num_channels", 3), Hidden: get(vcm, "hidden_size", -1), FFN: get(vcm, "intermediate_size", -1),
		Layers: get(vcm, "num_hidden_layers", -1), Heads: get(vcm, "num_attention_heads", -1),
		NormEps: floatOr(vcm, "layer_norm_eps", 1e-6), ProjNormEps: 1e-5, TextHidden: textHidden,
		Mean: imagenetMean, Std: imagenetStd, MinTiles: get(meta, "min_dynamic_patch", 1),
		MaxTiles: get(meta, "max_dynamic_patch", 12), Thumbnail: true, ImageTokenID: -1}
	if gerr != nil {
		return InternVLVision{}, nil, gerr
	}
	if t, ok := meta["use_thumbnail"].(bool); ok {
		v.Thumbnail = t
	}
	if d, ok := meta["dynamic_image_size"].(bool); ok && !d {
		v.MinTiles, v.MaxTiles = 1, 1 // one tile: the image resized to it
	}
	if fs, ok := format.MetaInt(meta, "force_image_size"); ok && int(fs) != v.ImageSize {
		return InternVLVision{}, nil, fmt.Errorf("config.json: force_image_size %d differs from the encoder's image_size %d (position embeddings would need interpolating)", fs, v.ImageSize)
	}
	ratio := floatOr(meta, "downsample_ratio", 0.5)
	if ratio <= 0 || ratio > 1 || math.Abs(1/ratio-math.Round(1/ratio)) > 1e-9 {
		return InternVLVision{}, nil, fmt.Errorf("config.json: downsample_ratio %v is not 1/n", ratio)
	}
	v.ScaleFactor = int(math.Round(1 / ratio))
	if ps, _ := format.MetaString(meta, "ps_version"); ps != "" && ps != "v2" {
		return InternVLVision{}, nil, fmt.Errorf("config.json: ps_version %q is not supported (want v2)", ps)
	}
	if sl, ok := format.MetaInt(meta, "select_layer"); ok && sl != -1 {
		return InternVLVision{}, nil, fmt.Errorf("config.json: select_layer %d is not supported (want -1, the last layer)", sl)
	}
	if nt, _ := format.MetaString(vcm, "norm_type"); nt != "" && nt != "layer_norm" {
		return InternVLVision{}, nil, fmt.Errorf("config.json vision_config: norm_type %q is not supported (want layer_norm)", nt)
	}
	if qn, _ := vcm["qk_normalization"].(bool); qn {
		return InternVLVision{}, nil, errors.New("config.json vision_config: qk_normalization is not supported")
	}
	if act, _ := format.MetaString(vcm, "hidden_act"); act != "" && act != "gelu" {
		return InternVLVision{}, nil, fmt.Errorf("config.json vision_config: hidden_act %q is not supported (want gelu)", act)
	}
	if err := meanStd(preproc, &v.Mean, &v.Std); err != nil {
		return InternVLVision{}, nil, err
	}
	if err := v.Validate(); err != nil {
		return InternVLVision{}, nil, err
	}
	w, err := readInternVL(ck, &v, internvlHFNames)
	if err != nil {
		return InternVLVision{}, nil, err
	}
	return v, w, nil
}

// internvlHFNames are the Hugging Face names of the encoder's tensors, by
// role ("cls", "pos", "patch.weight", "patch.bias", "l.<tail>" for a layer
// tensor, "mlp1.<tail>"); layer is the layer of an "l." role.
func internvlHFNames(role string, layer int) []string {
	switch role {
	case "cls":
		return []string{internvlPre + "embeddings.class_embedding"}
	case "pos":
		return []string{internvlPre + "embeddings.position_embedding"}
	case "patch.weight":
		return []string{internvlPatch}
	case "patch.bias":
		return []string{internvlPre + "embeddings.patch_embedding.bias"}
	}
	if tail, ok := strings.CutPrefix(role, "l."); ok {
		return []string{internvlLayer(layer) + tail}
	}
	return []string{role}
}

var internvlMMProjLayer = map[string]string{
	"norm1.weight": "ln1.weight", "norm1.bias": "ln1.bias", "norm2.weight": "ln2.weight", "norm2.bias": "ln2.bias",
	"attn.proj.weight": "attn_out.weight", "attn.proj.bias": "attn_out.bias",
	"mlp.fc1.weight": "ffn_up.weight", "mlp.fc1.bias": "ffn_up.bias",
	"mlp.fc2.weight": "ffn_down.weight", "mlp.fc2.bias": "ffn_down.bias",
	"ls1": "ls1.weight", "ls2": "ls2.weight",
}

// internvlMMProjNames are llama.cpp's mmproj names of the roles of
// internvlHFNames; the fused qkv is its three parts.
func internvlMMProjNames(role string, layer int) []string {
	switch role {
	case "cls":
		return []string{"v.class_embd"}
	case "pos":
		return []string{"v.position_embd.weight"}
	case "patch.weight":
		return []string{"v.patch_embd.weight"}
	case "patch.bias":
		return []string{"v.patch_embd.bias"}
	}
	if tail, ok := strings.CutPrefix(role, "l."); ok {
		pre := fmt.Sprintf("v.blk.%d.", layer)
		if kind, ok := strings.CutPrefix(tail, "attn.qkv."); ok {
			return []string{pre + "attn_q." + kind, pre + "attn_k." + kind, pre + "attn_v." + kind}
		}
		return []string{pre + internvlMMProjLayer[tail]}
	}
	if tail, ok := strings.CutPrefix(role, "mlp1."); ok {
		return []string{"mm.model.mlp." + tail}
	}
	return []string{role}
}

// readInternVL reads the encoder's tensors through names (the parts of
// a tensor joined in order) and builds the weights of its graph: the
// position table, ls1 / ls2 folded into the projections they scale.
func readInternVL(ck format.Checkpoint, v *InternVLVision, names func(role string, layer int) []string) (graph.Weights, error) {
	read := func(role string, layer, n int) ([]float32, error) {
		var out []float32
		parts := names(role, layer)
		for _, name := range parts {
			if _, ok := format.Find(ck, name); !ok {
				return nil, fmt.Errorf("%s checkpoint has no tensor %q", ck.Format(), name)
			}
			x, err := ck.ReadFloat32(name)
			if err != nil {
				return nil, fmt.Errorf("reading %q: %w", name, err)
			}
			if len(x) != n/len(parts) {
				return nil, fmt.Errorf("tensor %q holds %d values, the config implies %d", name, len(x), n/len(parts))
			}
			for i, f := range x {
				if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
					return nil, fmt.Errorf("tensor %q holds %v at index %d", name, f, i)
				}
			}
			out = append(out, x...)
		}
		return out, nil
	}
	g, err := BuildInternVLVision(v)
	if err != nil {
		return nil, err
	}
	H, N := v.Hidden, v.Grid()*v.Grid()
	w := graph.Weights{}
	var errs []error
	get := func(role string, layer, n int) []float32 {
		x, err := read(role, layer, n)
		if err != nil {
			errs = append(errs, err)
		}
		return x
	}
	cls, pos := get("cls", 0, H), get("pos", 0, (N+1)*H)
	bias := get("patch.bias", 0, H)
	w[internvlPatch] = get("patch.weight", 0, H*v.PatchCols())
	if len(errs) > 0 {
		return nil, errs[0]
	}
	table := make([]float32, 2*(N+1)*H)
	for r := 0; r <= N; r++ {
		for c := 0; c < H; c++ {
			table[r*H+c] = pos[r*H+c] + bias[c]
			table[(N+1+r)*H+c] = pos[r*H+c] + cls[c]
		}
	}
	w[internvlPosTable] = table
	for l := 0; l < v.Layers; l++ {
		p := internvlLayer(l)
		for _, t := range []string{"norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"} {
			w[p+t] = get("l."+t, l, H)
		}
		w[p+"attn.qkv.weight"] = get("l.attn.qkv.weight", l, 3*H*H)
		w[p+"attn.qkv.bias"] = get("l.attn.qkv.bias", l, 3*H)
		w[p+"mlp.fc1.weight"] = get("l.mlp.fc1.weight", l, v.FFN*H)
		w[p+"mlp.fc1.bias"] = get("l.mlp.fc1.bias", l, v.FFN)
		ls1, ls2 := get("l.ls1", l, H), get("l.ls2", l, H)
		pw, pb := get("l.attn.proj.weight", l, H*H), get("l.attn.proj.bias", l, H)
		fw, fb := get("l.mlp.fc2.weight", l, H*v.FFN), get("l.mlp.fc2.bias", l, H)
		if len(errs) > 0 {
			return nil, errs[0]
		}
		w[p+"attn.proj_ls1.weight"], w[p+"attn.proj_ls1.bias"] = scaleRows(pw, pb, ls1)
		w[p+"mlp.fc2_ls2.weight"], w[p+"mlp.fc2_ls2.bias"] = scaleRows(fw, fb, ls2)
	}
	P := v.ScaleFactor * v.ScaleFactor * H
	w["mlp1.0.weight"], w["mlp1.0.bias"] = get("mlp1.0.weight", 0, P), get("mlp1.0.bias", 0, P)
	w["mlp1.1.weight"], w["mlp1.1.bias"] = get("mlp1.1.weight", 0, v.TextHidden*P), get("mlp1.1.bias", 0, v.TextHidden)
	w["mlp1.3.weight"], w["mlp1.3.bias"] = get("mlp1.3.weight", 0, v.TextHidden*v.TextHidden), get("mlp1.3.bias", 0, v.TextHidden)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	for name, shape := range g.Weights {
		n := 1
		for _, d := range shape {
			n *= d
		}
		if len(w[name]) != n {
			return nil, fmt.Errorf("internvl vision: weight %q holds %d values, the graph reads %d", name, len(w[name]), n)
		}
	}
	return w, nil
}

// scaleRows returns the linear (w [N][K], b [N]) followed by a scale s
// [N] of its outputs as one linear: row n of w and b[n] times s[n].
func scaleRows(w, b, s []float32) ([]float32, []float32) {
	N := len(s)
	K := len(w) / N
	ow, ob := make([]float32, len(w)), make([]float32, N)
	for n := 0; n < N; n++ {
		for k := 0; k < K; k++ {
			ow[n*K+k] = w[n*K+k] * s[n]
		}
		ob[n] = b[n] * s[n]
	}
	return ow, ob
}

// LoadInternVLPair reads an InternVL model from llama.cpp's text GGUF
// (arch qwen2) and mmproj GGUF (projector internvl). ImageTokenID is -1:
// the caller looks <IMG_CONTEXT> up in the vocabulary.
func LoadInternVLPair(text, mmproj format.Checkpoint) (*InternVL, error) {
	if text.Format() != "gguf" || mmproj.Format() != "gguf" {
		return nil, errors.New("vision-language GGUF pair: both files must be GGUF")
	}
	tm, err := Load(text)
	if err != nil {
		return nil, fmt.Errorf("text model: %w", err)
	}
	v, w, err := LoadInternVLVisionMMProj(mmproj, tm.Config.Hidden)
	if err != nil {
		return nil, err
	}
	return &InternVL{Text: tm, Vision: v, VisionWeights: w}, nil
}

// LoadInternVLVisionMMProj reads the vision encoder and projector of
// llama.cpp's mmproj GGUF (projector internvl) for a text model of width
// textHidden. ImageTokenID is -1: the file does not store it.
func LoadInternVLVisionMMProj(mmproj format.Checkpoint, textHidden int) (InternVLVision, graph.Weights, error) {
	if mmproj.Format() != "gguf" {
		return InternVLVision{}, nil, errors.New("mmproj: not a GGUF file")
	}
	m := mmproj.Metadata()
	if a, _ := format.MetaString(m, "general.architecture"); a != "clip" {
		return InternVLVision{}, nil, fmt.Errorf("mmproj: general.architecture is %q, want clip", a)
	}
	if p, _ := format.MetaString(m, "clip.projector_type"); p != internvlProjector {
		return InternVLVision{}, nil, fmt.Errorf("mmproj: projector type %q is not supported here (want %s)", p, internvlProjector)
	}
	if g, ok := m["clip.use_gelu"].(bool); ok && !g {
		return InternVLVision{}, nil, errors.New("mmproj: clip.use_gelu is false; only GELU encoders are supported")
	}
	var gerr error
	get := func(key string, def int) int {
		n, ok := format.MetaInt(m, key)
		if !ok {
			if def < 0 && gerr == nil {
				gerr = fmt.Errorf("mmproj: %q is missing", key)
			}
			return def
		}
		return int(n)
	}
	// llama.cpp's defaults when the tile bounds are absent: 1 to 12
	v := InternVLVision{ImageSize: get("clip.vision.image_size", -1), PatchSize: get("clip.vision.patch_size", -1), Channels: 3,
		Hidden: get("clip.vision.embedding_length", -1), FFN: get("clip.vision.feed_forward_length", -1),
		Layers: get("clip.vision.block_count", -1), Heads: get("clip.vision.attention.head_count", -1),
		NormEps: floatOr(m, "clip.vision.attention.layer_norm_epsilon", 1e-6), ProjNormEps: 1e-5,
		ScaleFactor: get("clip.vision.projector.scale_factor", 2), TextHidden: textHidden,
		MinTiles: get("clip.vision.preproc_min_tiles", 1), MaxTiles: get("clip.vision.preproc_max_tiles", 12),
		Thumbnail: true, ImageTokenID: -1}
	if gerr != nil {
		return InternVLVision{}, nil, gerr
	}
	if err := mmprojMeanStd(m, &v.Mean, &v.Std); err != nil {
		return InternVLVision{}, nil, err
	}
	if err := v.Validate(); err != nil {
		return InternVLVision{}, nil, fmt.Errorf("mmproj: %w", err)
	}
	w, err := readInternVL(mmproj, &v, internvlMMProjNames)
	if err != nil {
		return InternVLVision{}, nil, fmt.Errorf("mmproj: %w", err)
	}
	return v, w, nil
}

// InternVLMarkerPieces are the text pieces the InternVL prompt layout
// places around an image's rows: <img>, </img> and the image token
// <IMG_CONTEXT>.
var InternVLMarkerPieces = []string{"<img>", "</img>", "<IMG_CONTEXT>"}
