package arch

import (
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/tensor"
)

// The Gemma family (Gemma 1): the Llama block with embeddings multiplied
// by sqrt(hidden_size), every RMSNorm gain (1+w), a GELU-tanh gated
// feed-forward, an explicit head_dim, NeoX RoPE and a tied classifier.
// HF checkpoints store w; llama.cpp's converter adds the 1 into every
// *norm.weight of its GGUF files and does not permute q/k rows (its gemma
// runtime uses NeoX RoPE), so GGUF gains use offset 0.

func init() {
	register(&Family{
		Name:              "gemma",
		HFArchitectures:   []string{"GemmaForCausalLM"},
		HFModelTypes:      []string{"gemma"},
		GGUFArchitectures: []string{"gemma"},
		configHF:          gemmaConfigHF,
		configGGUF: func(m map[string]any, arch string) (Config, error) {
			c, err := decoderConfigGGUF(m, arch, "gemma", graph.RopeHalf)
			gemmaCommon(&c, 0, "")
			return c, err
		},
		tensorNames: decoderTensorName,
		build:       buildDecoder,
	})
}

func gemmaConfigHF(m map[string]any) (Config, error) {
	if err := gemmaRefuse(m); err != nil {
		return Config{}, err
	}
	c, err := decoderConfigHF(m, "gemma", graph.RopeHalf)
	dtype, _ := format.MetaString(m, "torch_dtype")
	gemmaCommon(&c, 1, dtype)
	if _, ok := m["tie_word_embeddings"].(bool); !ok {
		c.Tied = true // the HF Gemma configs' default
	}
	return c, err
}

// gemmaCommon sets what every Gemma generation shares: the (1+w) gain
// offset (1 for HF weights, 0 for GGUF ones), GELU-tanh and the sqrt(hidden) embedding scale, which HF rounds to the checkpoint
// dtype (llama.cpp keeps it in f32: pass dtype "").
func gemmaCommon(c *Config, normOffset float64, dtype string) {
	c.NormOffset = normOffset
	c.GELU = true
	c.EmbedScale = roundToDType(math.Sqrt(float64(max(c.Hidden, 0))), dtype)
}

// gemmaRefuse rejects config.json values the Gemma graphs cannot honour:
// biases, a feed-forward activation other than tanh-approximated GELU, and
// logit soft-capping (Gemma 2's; Gemma 3 leaves it null).
func gemmaRefuse(m map[string]any) error {
	if err := refuseBiases(m, "attention_bias"); err != nil {
		return err
	}
	if a, ok := m["hidden_activation"]; ok && a != nil {
		s, _ := a.(string)
		switch s {
		case "gelu_pytorch_tanh", "gelu_new", "gelu_fast":
		default:
			return fmt.Errorf("config.json: hidden_activation %v is not supported (only tanh-approximated GELU)", a)
		}
	}
	for _, k := range []string{"attn_logit_softcapping", "final_logit_softcapping"} {
		if v, ok := m[k]; ok && v != nil {
			return fmt.Errorf("config.json: %s %v is not supported", k, v)
		}
	}
	return nil
}

// roundToDType rounds v to the float type a checkpoint's torch_dtype
// names, as torch.tensor(v, dtype=...) does.
func roundToDType(v float64, dtype string) float64 {
	switch dtype {
	case "bfloat16":
		return float64(tensor.BF16ToF32(tensor.F32ToBF16(float32(v))))
	case "float16":
		return float64(tensor.F16ToF32(tensor.F32ToF16(float32(v))))
	}
	return float64(float32(v))
}
