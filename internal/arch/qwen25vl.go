package arch

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/format"
)

// Qwen2.5-VL vision-language models (Qwen2.5-VL-3B and its siblings):
// Qwen2-VL's text model (Qwen2 with M-RoPE) and Qwen2-VL's vision encoder
// with four changes, options of Qwen2VLVision that BuildQwen2VLVision
// reads:
//   - RMSNorm (no bias) in place of LayerNorm, in the blocks and in the
//     merger's ln_q;
//   - a gated SiLU MLP with biases, down(silu(gate(x)) * up(x)), in place
//     of the quick-GELU one;
//   - window attention: the merged-token grid is cut into windows of
//     window_size/patch/merge merged tokens a side (the last row and
//     column of windows partial), and every block but those of
//     fullatt_block_indexes attends only within its window;
//   - the vision width (hidden_size) and the text width (out_hidden_size)
//     are given apart.
// The token layout, the 2-D vision RoPE, the merger's 2x2 join and the
// preprocessing are Qwen2-VL's.

const (
	qwen25vlArchitecture = "Qwen2_5_VLForConditionalGeneration"
	qwen25vlModelType    = "qwen2_5_vl"
	qwen25vlProjector    = "qwen2.5vl_merger"
	qwen2vlProjector     = "qwen2vl_merger"
	// llamaCppWindowSize is the window llama.cpp's clip uses for the
	// qwen2.5vl_merger projector: the mmproj file does not store it (its
	// converter drops vision_config.window_size), and the published
	// Qwen2.5-VL checkpoints use 112 pixels.
	llamaCppWindowSize = 112
	// hfWindowSize is transformers' default vision_config.window_size.
	hfWindowSize = 112
)

// isQwen25VL reports whether config.json metadata names a Qwen2.5-VL
// model.
func isQwen25VL(meta map[string]any) bool {
	archs, _ := format.MetaStrings(meta, "architectures")
	for _, a := range archs {
		if a == qwen25vlArchitecture {
			return true
		}
	}
	mt, _ := format.MetaString(meta, "model_type")
	return mt == qwen25vlModelType
}

// isQwenVLProjector reports whether an mmproj projector type
// (clip.projector_type) is Qwen2-VL's or Qwen2.5-VL's merger, which
// LoadQwen2VLPair reads.
func isQwenVLProjector(p string) bool { return p == qwen2vlProjector || p == qwen25vlProjector }

// qwen25vlVisionHF reads a Qwen2.5-VL vision_config for a text model of
// width textHidden.
func qwen25vlVisionHF(vcm map[string]any, textHidden int) (Qwen2VLVision, error) {
	var gerr error
	get := func(key string, def int) int {
		n, ok := format.MetaInt(vcm, key)
		if !ok {
			if _, given := vcm[key]; (def < 0 || given) && gerr == nil {
				gerr = fmt.Errorf("config.json vision_config: %q is missing or not an integer", key)
			}
			return def
		}
		return int(n)
	}
	chans := get("in_channels", 3) // newer transformers
	if _, ok := vcm["in_chans"]; ok {
		chans = get("in_chans", -1) // the published checkpoints
	}
	v := Qwen2VLVision{PatchSize: get("patch_size", -1), TemporalPatch: get("temporal_patch_size", 2),
		Merge: get("spatial_merge_size", 2), Channels: chans, Hidden: get("hidden_size", -1),
		FFN: get("intermediate_size", -1), Layers: get("depth", -1), Heads: get("num_heads", -1),
		NormEps: 1e-6, RopeTheta: 10000, TextHidden: textHidden, Mean: clipMean, Std: clipStd, ImageTokenID: -1,
		RMSNorm: true, GatedMLP: true, WindowSize: get("window_size", hfWindowSize)}
	if gerr != nil {
		return Qwen2VLVision{}, gerr
	}
	if act, _ := format.MetaString(vcm, "hidden_act"); act != "" && act != "silu" {
		return Qwen2VLVision{}, fmt.Errorf("config.json vision_config: hidden_act %q is not supported (want silu)", act)
	}
	if out, ok := format.MetaInt(vcm, "out_hidden_size"); ok && int(out) != v.TextHidden {
		return Qwen2VLVision{}, fmt.Errorf("config.json vision_config: out_hidden_size %d differs from the text model's %d", out, v.TextHidden)
	}
	l, ok := format.List(vcm["fullatt_block_indexes"])
	if !ok {
		return Qwen2VLVision{}, fmt.Errorf("config.json vision_config: \"fullatt_block_indexes\" is missing")
	}
	for _, x := range l {
		n, ok := format.MetaInt(map[string]any{"v": x}, "v")
		if !ok {
			return Qwen2VLVision{}, fmt.Errorf("config.json vision_config: fullatt_block_indexes holds %s", show(x))
		}
		v.FullAttnBlocks = append(v.FullAttnBlocks, int(n))
	}
	return v, nil
}

// qwen25vlVisionMMProj sets the Qwen2.5-VL options of v from an mmproj
// file's metadata (projector qwen2.5vl_merger): the full-attention blocks
// are every clip.vision.n_wa_pattern-th (as llama.cpp reads them), the
// window llama.cpp's 112 pixels, the MLP gated SiLU (clip.use_silu).
func qwen25vlVisionMMProj(m map[string]any, v *Qwen2VLVision) error {
	n, ok := format.MetaInt(m, "clip.vision.n_wa_pattern")
	if !ok || n <= 0 {
		return fmt.Errorf("mmproj: clip.vision.n_wa_pattern is missing or not positive (a %s projector needs it)", qwen25vlProjector)
	}
	if silu, ok := m["clip.use_silu"].(bool); ok && !silu {
		return fmt.Errorf("mmproj: clip.use_silu is false; a %s encoder's MLP is gated SiLU", qwen25vlProjector)
	}
	v.RMSNorm, v.GatedMLP, v.WindowSize = true, true, llamaCppWindowSize
	v.FullAttnBlocks = nil
	for l := int(n) - 1; l < v.Layers; l += int(n) {
		v.FullAttnBlocks = append(v.FullAttnBlocks, l)
	}
	return nil
}
