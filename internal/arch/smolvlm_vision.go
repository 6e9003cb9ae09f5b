package arch

import (
	"errors"
	"fmt"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
)

// The vision half of a SmolVLM / Idefics3 checkpoint on its own, for the
// compiler, which streams the text model and stores the encoder beside it.

// LoadVisionHF reads the vision encoder and connector of a SmolVLM /
// Idefics3 Hugging Face checkpoint (not its text weights); preproc is the
// parsed preprocessor_config.json or nil.
func LoadVisionHF(ck format.Checkpoint, preproc map[string]any) (VisionConfig, graph.Weights, error) {
	if ck.Format() != "safetensors" {
		return VisionConfig{}, nil, fmt.Errorf("vision-language models load from Hugging Face folders; %s is not supported yet", ck.Format())
	}
	meta := ck.Metadata()
	if !isSmolVLM(meta) {
		return VisionConfig{}, nil, errors.New("config.json: not a SmolVLM / Idefics3 model")
	}
	vcm, ok := meta["vision_config"].(map[string]any)
	if !ok {
		return VisionConfig{}, nil, errors.New("config.json: \"vision_config\" is missing")
	}
	text, err := smolvlmTextConfigHF(meta)
	if err != nil {
		return VisionConfig{}, nil, err
	}
	vc, err := visionConfigHF(meta, vcm, preproc)
	if err != nil {
		return vc, nil, err
	}
	vc.TextHidden = text.Hidden
	return loadVision(vc, ck, func(name string) string { return name })
}

// LoadVisionMMProj reads the vision encoder and projector of llama.cpp's
// mmproj GGUF (projector idefics3) for a text model of width textHidden.
// ImageTokenID is -1: the file does not store it.
func LoadVisionMMProj(mmproj format.Checkpoint, textHidden int) (VisionConfig, graph.Weights, error) {
	if mmproj.Format() != "gguf" {
		return VisionConfig{}, nil, errors.New("mmproj: not a GGUF file")
	}
	m := mmproj.Metadata()
	if a, _ := format.MetaString(m, "general.architecture"); a != "clip" {
		return VisionConfig{}, nil, fmt.Errorf("mmproj: general.architecture is %q, want clip", a)
	}
	if p, _ := format.MetaString(m, "clip.projector_type"); p != "idefics3" {
		return VisionConfig{}, nil, fmt.Errorf("mmproj: projector type %q is not supported (want idefics3)", p)
	}
	if g, ok := m["clip.use_gelu"].(bool); ok && !g {
		return VisionConfig{}, nil, errors.New("mmproj: clip.use_gelu is false; only GELU encoders are supported")
	}
	var gerr error
	get := func(key string) int {
		v, ok := format.MetaInt(m, key)
		if !ok && gerr == nil {
			gerr = fmt.Errorf("mmproj: %q is missing", key)
		}
		return int(v)
	}
	vc := VisionConfig{ImageSize: get("clip.vision.image_size"), PatchSize: get("clip.vision.patch_size"), Channels: 3,
		Hidden: get("clip.vision.embedding_length"), FFN: get("clip.vision.feed_forward_length"),
		Layers: get("clip.vision.block_count"), Heads: get("clip.vision.attention.head_count"),
		NormEps: floatOr(m, "clip.vision.attention.layer_norm_epsilon", 1e-6), ScaleFactor: get("clip.vision.projector.scale_factor"),
		TextHidden: textHidden, ImageTokenID: -1}
	if gerr != nil {
		return vc, nil, gerr
	}
	vc.LongestEdge = vc.ImageSize
	if v, ok := format.MetaInt(m, "clip.vision.preproc_image_size"); ok {
		vc.LongestEdge = int(v)
	}
	if err := mmprojMeanStd(m, &vc.Mean, &vc.Std); err != nil {
		return vc, nil, err
	}
	vc, w, err := loadVision(vc, mmproj, mmprojName)
	if err != nil {
		return vc, nil, fmt.Errorf("mmproj: %w", err)
	}
	return vc, w, nil
}

// loadVision validates vc and reads the weights of its graph from ck.
func loadVision(vc VisionConfig, ck format.Checkpoint, src func(string) string) (VisionConfig, graph.Weights, error) {
	if err := vc.Validate(); err != nil {
		return vc, nil, err
	}
	vg, err := BuildVision(&vc)
	if err != nil {
		return vc, nil, err
	}
	w, err := readWeights(ck, vg, src)
	return vc, w, err
}

// MarkerPieces returns the text pieces the Idefics3 prompt layout places
// around an image's rows, for images cut into at most the grid the
// longest edge allows: the image token, <fake_token_around_image>,
// <global-img>, "\n", "\n\n" and every <row_r_col_c>.
func (v *VisionConfig) MarkerPieces() []string {
	p := []string{"<image>", "<fake_token_around_image>", "<global-img>", "\n", "\n\n"}
	n := (v.LongestEdge + v.ImageSize - 1) / max(v.ImageSize, 1)
	for r := 1; r <= n; r++ {
		for c := 1; c <= n; c++ {
			p = append(p, fmt.Sprintf("<row_%d_col_%d>", r, c))
		}
	}
	return p
}

// mmprojMeanStd reads an mmproj file's image normalization: the three
// values each of clip.vision.image_mean and clip.vision.image_std.
func mmprojMeanStd(m map[string]any, mean, std *[3]float32) error {
	for i, key := range []string{"clip.vision.image_mean", "clip.vision.image_std"} {
		l, ok := format.List(m[key])
		if !ok || len(l) != 3 {
			return fmt.Errorf("mmproj: %q is missing or not 3 values", key)
		}
		dst := mean
		if i == 1 {
			dst = std
		}
		for c, x := range l {
			f, ok := format.MetaFloat(map[string]any{"v": x}, "v")
			if !ok {
				return fmt.Errorf("mmproj: %q holds %s", key, show(x))
			}
			dst[c] = float32(f)
		}
	}
	return nil
}
