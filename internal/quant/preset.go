package quant

import (
	"fmt"
	"slices"
	"strings"
)

// Name patterns of the tensors presets keep at W8. They match Hugging Face
// names ("model.layers.3.self_attn.v_proj.weight", "lm_head.weight") and GGUF
// names ("blk.3.attn_v.weight", "output.weight"); the hybrid families' GGUF
// tensors are read under their Hugging Face names, so their patterns name
// those only.
const (
	PatternLMHead = `re:(^|\.)(lm_head|output)\.weight$`
	PatternVProj  = `re:(^|\.)(v_proj|attn_v)\.weight$`
	// PatternKProj is attention's key projection.
	PatternKProj = `re:(^|\.)(k_proj|attn_k)\.weight$`
	// PatternEmbed is the token embedding table (Hugging Face and GGUF
	// names); an override naming it sets the scheme of an untied table,
	// which is otherwise W8.
	PatternEmbed = `re:(^|\.)(embed_tokens|token_embd)\.weight$`
	// PatternDownProj is the MLP's down projection: down_proj, ffn_down,
	// LFM2's feed_forward.w2 and Granite 4 hybrid's shared_mlp.output_linear.
	PatternDownProj = `re:(^|\.)(down_proj|ffn_down|feed_forward\.w2|shared_mlp\.output_linear)\.weight$`
	// PatternMixerProj is the input and output projections of the
	// recurrent mixers, whose error the carried state passes on to every
	// later token: LFM2's short convolution (conv.in_proj, whose B, C and
	// x outputs multiply together, and conv.out_proj), Mamba2's
	// (mamba.in_proj, mamba.out_proj) and Gated DeltaNet's
	// (linear_attn.in_proj_qkv, in_proj_z, in_proj_a, in_proj_b,
	// out_proj).
	PatternMixerProj = `re:(^|\.)(conv\.(in|out)_proj|mamba\.(in|out)_proj|linear_attn\.(in_proj_(qkv|z|a|b)|out_proj))\.weight$`
	// PatternDeltaNetIO is Gated DeltaNet's q/k/v and output-gate input
	// projections and its output projection, which presets keep at W8
	// with float input (Scheme.FloatInput): int8 rounding of their inputs
	// is the largest error int8 activations add to Qwen3.5.
	PatternDeltaNetIO = `re:(^|\.)linear_attn\.(in_proj_(qkv|z)|out_proj)\.weight$`
	// PatternPerLayer is Gemma 4's per-layer input projections
	// (per_layer_model_projection, per_layer_input_gate,
	// per_layer_projection): small matrices every layer reads.
	PatternPerLayer = `re:(^|\.)(per_layer_model_projection|per_layer_input_gate|per_layer_projection)\.weight$`
)

// presets builds the named recipes. The LPBQ presets follow the W4A16 flow
// of the QNN exporters: LPBQ weights, 16-bit activations, uint8 KV cache, and
// the sensitive linears (lm_head, v_proj, down_proj) at W8; the block size is
// the one the shipped models use (16: Qwen2.5, Qwen3-1.7B, Phi-4-mini; 32:
// Llama 3.2, Qwen3-0.6B; 64: Gemma, Gemma 3, Granite). A recipe file can drop
// the W8 overrides a model does not need. The q4 presets keep lm_head at W8,
// as MNN's export does by default, and quantize activations dynamically to int8.
// Every preset but f16 adds the hybrid families' rules (familyOverrides).
//
// The lpbq4 presets are sized against llama.cpp's files of the same model
// (docs/quantization.md has the measured table): LPBQ blocks of 32 on
// every linear and on the token embedding, the classifier in Q6_K
// super-blocks (W8 when its width is not a multiple of 256), an f16 KV
// cache. lpbq4-h6 is the size of llama.cpp's Q4_0; lpbq4-h6-v8 also
// keeps the value projections at W8 and stays below Q4_K_M;
// lpbq4-h6-k8v8 keeps the key projections at W8 as well.
var presets = map[string]func() Recipe{
	"lpbq4-h6":       func() Recipe { return lpbq4Preset("lpbq4-h6") },
	"lpbq4-h6-v8":    func() Recipe { return lpbq4Preset("lpbq4-h6-v8", PatternVProj) },
	"lpbq4-h6-k8v8":  func() Recipe { return lpbq4Preset("lpbq4-h6-k8v8", PatternKProj, PatternVProj) },
	"lpbq5":          lpbq5Preset,
	"w4a16-lpbq":     func() Recipe { return lpbqPreset("w4a16-lpbq", 32) },
	"w4a16-lpbq-b16": func() Recipe { return lpbqPreset("w4a16-lpbq-b16", 16) },
	"w4a16-lpbq-b64": func() Recipe { return lpbqPreset("w4a16-lpbq-b64", 64) },
	"w8a16": func() Recipe {
		return Recipe{Name: "w8a16", Default: Scheme{Kind: KindW8}, Overrides: familyOverrides(),
			Activations: Activations{DType: ActA16}, KV: KVF16}
	},
	"q4":     func() Recipe { return q4Preset("q4", false) },
	"q4-hqq": func() Recipe { return q4Preset("q4-hqq", true) },
	"f16": func() Recipe {
		return Recipe{Name: "f16", Default: Scheme{Kind: KindF16}, Activations: Activations{DType: ActA16}, KV: KVF16}
	},
}

// familyOverrides are the rules of the hybrid families' sensitive
// tensors: the recurrent mixers' projections and Gemma 4's per-layer
// projections at W8, Gated DeltaNet's q/k/v, output-gate and output
// projections also with float input. The names are those of these
// families only, so the rules change nothing on other models.
func familyOverrides() []Override {
	w8 := Scheme{Kind: KindW8}
	return []Override{
		{Pattern: PatternDeltaNetIO, Scheme: Scheme{Kind: KindW8, FloatInput: true}},
		{Pattern: PatternMixerProj, Scheme: w8},
		{Pattern: PatternPerLayer, Scheme: w8},
	}
}

func lpbqPreset(name string, block int) Recipe {
	w8 := Scheme{Kind: KindW8}
	return Recipe{
		Name:    name,
		Default: Scheme{Kind: KindLPBQ, Block: block, Mode: LPBQRefined},
		Overrides: append(familyOverrides(),
			Override{Pattern: PatternLMHead, Scheme: w8},
			Override{Pattern: PatternVProj, Scheme: w8},
			Override{Pattern: PatternDownProj, Scheme: w8},
		),
		Activations: Activations{DType: ActA16},
		KV:          KVU8,
	}
}

// lpbq4Preset is LPBQ b32 on every linear and the token embedding, the
// classifier Q6_K, an f16 KV cache and the weights w8 names at W8.
func lpbq4Preset(name string, w8 ...string) Recipe {
	lp := Scheme{Kind: KindLPBQ, Block: 32, Mode: LPBQRefined}
	ov := append(familyOverrides(),
		Override{Pattern: PatternEmbed, Scheme: lp},
		Override{Pattern: PatternLMHead, Scheme: Scheme{Kind: KindQ6K}})
	for _, p := range w8 {
		ov = append(ov, Override{Pattern: p, Scheme: Scheme{Kind: KindW8}})
	}
	return Recipe{Name: name, Default: lp, Overrides: ov, Activations: Activations{DType: ActA16}, KV: KVF16}
}

// lpbq5Preset is lpbq5 (5-bit LPBQ, its grid searched per row) on every
// linear, the classifier and the token embedding, with an f16 KV cache:
// 5.25 bits a weight, the size of llama.cpp's Q5_0 less a quarter bit.
func lpbq5Preset() Recipe {
	l5 := Scheme{Kind: KindLPBQ5, Block: LPBQ5Block}
	return Recipe{Name: "lpbq5", Default: l5,
		Overrides:   append(familyOverrides(), Override{Pattern: PatternEmbed, Scheme: l5}),
		Activations: Activations{DType: ActA16}, KV: KVF16}
}

func q4Preset(name string, hqq bool) Recipe {
	return Recipe{
		Name:        name,
		Default:     Scheme{Kind: KindQ4, Block: DefaultQ4Group, Sym: true, HQQ: hqq},
		Overrides:   append(familyOverrides(), Override{Pattern: PatternLMHead, Scheme: Scheme{Kind: KindW8}}),
		Activations: Activations{DType: ActInt8Dynamic},
		KV:          KVF16,
	}
}

// PresetNames returns the names Preset knows, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Preset returns the built-in recipe of that name.
func Preset(name string) (Recipe, error) {
	f, ok := presets[name]
	if !ok {
		return Recipe{}, &RecipeError{Field: "name", Msg: fmt.Sprintf("unknown preset %q (known: %s)", name, strings.Join(PresetNames(), ", "))}
	}
	r := f()
	if err := r.Validate(); err != nil { // compiles the patterns
		return Recipe{}, fmt.Errorf("quant: preset %s: %w", name, err)
	}
	return r, nil
}
