package quant

import (
	"fmt"
	"slices"
	"strings"
)

// Name patterns of the tensors presets keep at W8. They match Hugging Face
// names ("model.layers.3.self_attn.v_proj.weight", "lm_head.weight") and GGUF
// names ("blk.3.attn_v.weight", "output.weight").
const (
	PatternLMHead   = `re:(^|\.)(lm_head|output)\.weight$`
	PatternVProj    = `re:(^|\.)(v_proj|attn_v)\.weight$`
	PatternDownProj = `re:(^|\.)(down_proj|ffn_down)\.weight$`
)

// presets builds the named recipes. The LPBQ presets follow the W4A16 flow
// of the QNN exporters: LPBQ weights, 16-bit activations, uint8 KV cache, and
// the sensitive linears (lm_head, v_proj, down_proj) at W8; the block size is
// the one the shipped models use (16: Qwen2.5, Qwen3-1.7B, Phi-4-mini; 32:
// Llama 3.2, Qwen3-0.6B; 64: Gemma, Gemma 3, Granite). A recipe file can drop
// the W8 overrides a model does not need. The q4 presets keep lm_head at W8,
// as MNN's export does by default, and quantize activations dynamically to int8.
var presets = map[string]func() Recipe{
	"w4a16-lpbq":     func() Recipe { return lpbqPreset("w4a16-lpbq", 32) },
	"w4a16-lpbq-b16": func() Recipe { return lpbqPreset("w4a16-lpbq-b16", 16) },
	"w4a16-lpbq-b64": func() Recipe { return lpbqPreset("w4a16-lpbq-b64", 64) },
	"w8a16": func() Recipe {
		return Recipe{Name: "w8a16", Default: Scheme{Kind: KindW8}, Activations: Activations{DType: ActA16}, KV: KVF16}
	},
	"q4":     func() Recipe { return q4Preset("q4", false) },
	"q4-hqq": func() Recipe { return q4Preset("q4-hqq", true) },
	"f16": func() Recipe {
		return Recipe{Name: "f16", Default: Scheme{Kind: KindF16}, Activations: Activations{DType: ActA16}, KV: KVF16}
	},
}

func lpbqPreset(name string, block int) Recipe {
	w8 := Scheme{Kind: KindW8}
	return Recipe{
		Name:    name,
		Default: Scheme{Kind: KindLPBQ, Block: block, Mode: LPBQRefined},
		Overrides: []Override{
			{Pattern: PatternLMHead, Scheme: w8},
			{Pattern: PatternVProj, Scheme: w8},
			{Pattern: PatternDownProj, Scheme: w8},
		},
		Activations: Activations{DType: ActA16},
		KV:          KVU8,
	}
}

func q4Preset(name string, hqq bool) Recipe {
	return Recipe{
		Name:        name,
		Default:     Scheme{Kind: KindQ4, Block: DefaultQ4Group, Sym: true, HQQ: hqq},
		Overrides:   []Override{{Pattern: PatternLMHead, Scheme: Scheme{Kind: KindW8}}},
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
