package tinymodel

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/tensor"
)

// Config describes a Llama model (the fields of LlamaForCausalLM's config).
type Config struct {
	HiddenSize       int
	IntermediateSize int
	NumLayers        int
	NumHeads         int
	NumKVHeads       int
	VocabSize        int
	MaxPositions     int     // max_position_embeddings
	HeadDim          int     // 0 means HiddenSize / NumHeads
	RMSNormEps       float64 // 0 means 1e-5
	RopeTheta        float64 // 0 means 10000
	// TieWordEmbeddings omits lm_head.weight; the output uses the embeddings.
	TieWordEmbeddings bool
	// DType is the stored type: F32 (also for the zero value), F16 or BF16.
	DType tensor.DType
	// Shards > 1 splits the weights over that many files plus an index.
	Shards int
	// QKNorm adds the per-head RMSNorm gains of q and k
	// (self_attn.q_norm.weight, self_attn.k_norm.weight, HeadDim wide) and
	// writes the model as Qwen3ForCausalLM (model_type qwen3).
	QKNorm bool
	// BOSTokenID and EOSTokenID are config.json's bos_token_id and
	// eos_token_id; when both are 0 they are 1 and 2.
	BOSTokenID, EOSTokenID int
}

// Default returns a small GQA model: 2 layers, hidden 32, 4 heads of 8, 2
// KV heads, vocab 64, F32, untied.
func Default() Config {
	return Config{HiddenSize: 32, IntermediateSize: 48, NumLayers: 2, NumHeads: 4, NumKVHeads: 2,
		VocabSize: 64, MaxPositions: 128}
}

// Tensor is one generated weight, row-major with Shape outermost first.
type Tensor struct {
	Shape []int64
	Data  []float32
}

// withDefaults fills the zero-valued optional fields.
func (c Config) withDefaults() Config {
	if c.HeadDim == 0 && c.NumHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumHeads
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-5
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.DType == tensor.Invalid {
		c.DType = tensor.F32
	}
	if c.BOSTokenID == 0 && c.EOSTokenID == 0 {
		c.BOSTokenID, c.EOSTokenID = 1, 2
	}
	return c
}

func (c Config) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"HiddenSize", c.HiddenSize}, {"IntermediateSize", c.IntermediateSize}, {"NumLayers", c.NumLayers},
		{"NumHeads", c.NumHeads}, {"NumKVHeads", c.NumKVHeads}, {"VocabSize", c.VocabSize},
		{"MaxPositions", c.MaxPositions}, {"HeadDim", c.HeadDim}} {
		if f.v <= 0 {
			return fmt.Errorf("tinymodel: %s = %d, want > 0", f.name, f.v)
		}
	}
	if c.NumHeads%c.NumKVHeads != 0 {
		return fmt.Errorf("tinymodel: NumHeads %d is not a multiple of NumKVHeads %d", c.NumHeads, c.NumKVHeads)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("tinymodel: HeadDim %d is odd", c.HeadDim)
	}
	switch c.DType {
	case tensor.F32, tensor.F16, tensor.BF16:
	default:
		return fmt.Errorf("tinymodel: DType %v, want f32, f16 or bf16", c.DType)
	}
	return nil
}

// weightSpec is one weight in generation order.
type weightSpec struct {
	name  string
	shape []int64
	init  byte // 'l' linear N(0,1/fan_in), 'n' norm U(0.5,1.5), 'e' embedding N(0,1)
}

func specs(c Config) []weightSpec {
	D, F, V := int64(c.HiddenSize), int64(c.IntermediateSize), int64(c.VocabSize)
	Q, KV := int64(c.NumHeads*c.HeadDim), int64(c.NumKVHeads*c.HeadDim)
	out := []weightSpec{{"model.embed_tokens.weight", []int64{V, D}, 'e'}}
	for i := range c.NumLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		out = append(out,
			weightSpec{p + "input_layernorm.weight", []int64{D}, 'n'},
			weightSpec{p + "self_attn.q_proj.weight", []int64{Q, D}, 'l'},
			weightSpec{p + "self_attn.k_proj.weight", []int64{KV, D}, 'l'},
			weightSpec{p + "self_attn.v_proj.weight", []int64{KV, D}, 'l'},
			weightSpec{p + "self_attn.o_proj.weight", []int64{D, Q}, 'l'},
		)
		if c.QKNorm {
			out = append(out,
				weightSpec{p + "self_attn.q_norm.weight", []int64{int64(c.HeadDim)}, 'n'},
				weightSpec{p + "self_attn.k_norm.weight", []int64{int64(c.HeadDim)}, 'n'},
			)
		}
		out = append(out,
			weightSpec{p + "post_attention_layernorm.weight", []int64{D}, 'n'},
			weightSpec{p + "mlp.gate_proj.weight", []int64{F, D}, 'l'},
			weightSpec{p + "mlp.up_proj.weight", []int64{F, D}, 'l'},
			weightSpec{p + "mlp.down_proj.weight", []int64{D, F}, 'l'},
		)
	}
	out = append(out, weightSpec{"model.norm.weight", []int64{D}, 'n'})
	if !c.TieWordEmbeddings {
		out = append(out, weightSpec{"lm_head.weight", []int64{V, D}, 'l'})
	}
	return out
}

// Llama returns the weights of the random model (cfg, seed) under Hugging
// Face names, rounded to cfg.DType.
func Llama(cfg Config, seed int64) (map[string]Tensor, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(uint64(seed), 0x6c6c616d61))
	out := map[string]Tensor{}
	for _, s := range specs(cfg) {
		n, err := tensor.NumElements(s.shape)
		if err != nil {
			return nil, fmt.Errorf("tinymodel: %s: %w", s.name, err)
		}
		v := make([]float32, n)
		std := 1.0
		if s.init == 'l' {
			std = 1 / math.Sqrt(float64(s.shape[1]))
		}
		for i := range v {
			if s.init == 'n' {
				v[i] = float32(0.5 + r.Float64())
			} else {
				v[i] = float32(r.NormFloat64() * std)
			}
			v[i] = round(v[i], cfg.DType)
		}
		out[s.name] = Tensor{Shape: s.shape, Data: v}
	}
	return out, nil
}

func round(v float32, d tensor.DType) float32 {
	switch d {
	case tensor.F16:
		return tensor.F16ToF32(tensor.F32ToF16(v))
	case tensor.BF16:
		return tensor.BF16ToF32(tensor.F32ToBF16(v))
	}
	return v
}

// WriteLlama writes config.json and the weights of (cfg, seed) into dir
// (created if missing): model.safetensors, or with cfg.Shards > 1 the files
// model-0000i-of-0000N.safetensors and model.safetensors.index.json.
func WriteLlama(dir string, cfg Config, seed int64) error {
	cfg = cfg.withDefaults()
	weights, err := Llama(cfg, seed)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tinymodel: %w", err)
	}
	if err := writeJSON(filepath.Join(dir, safetensors.ConfigName), hfConfig(cfg)); err != nil {
		return err
	}
	var ts []safetensors.Tensor
	for _, s := range specs(cfg) {
		w := weights[s.name]
		ts = append(ts, safetensors.Tensor{Name: s.name, DType: cfg.DType, Shape: w.Shape, Data: w.Data})
	}
	meta := map[string]string{"format": "pt"}
	if cfg.Shards <= 1 {
		if err := safetensors.Write(filepath.Join(dir, safetensors.SingleName), ts, meta); err != nil {
			return fmt.Errorf("tinymodel: %w", err)
		}
		return nil
	}
	n := cfg.Shards
	per := (len(ts) + n - 1) / n
	weightMap := map[string]string{}
	var total int64
	for i := range n {
		part := ts[min(i*per, len(ts)):min((i+1)*per, len(ts))]
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n)
		for _, t := range part {
			weightMap[t.Name] = name
			b, _ := cfg.DType.ByteSize(int64(len(t.Data)))
			total += b
		}
		if err := safetensors.Write(filepath.Join(dir, name), part, meta); err != nil {
			return fmt.Errorf("tinymodel: %w", err)
		}
	}
	index := map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}
	return writeJSON(filepath.Join(dir, safetensors.IndexName), index)
}

// hfConfig returns the config.json content of cfg.
func hfConfig(c Config) map[string]any {
	dtype := map[tensor.DType]string{tensor.F32: "float32", tensor.F16: "float16", tensor.BF16: "bfloat16"}[c.DType]
	arch, modelType := "LlamaForCausalLM", "llama"
	if c.QKNorm {
		arch, modelType = "Qwen3ForCausalLM", "qwen3"
	}
	m := map[string]any{
		"architectures":           []string{arch},
		"model_type":              modelType,
		"hidden_size":             c.HiddenSize,
		"intermediate_size":       c.IntermediateSize,
		"num_hidden_layers":       c.NumLayers,
		"num_attention_heads":     c.NumHeads,
		"num_key_value_heads":     c.NumKVHeads,
		"head_dim":                c.HeadDim,
		"vocab_size":              c.VocabSize,
		"max_position_embeddings": c.MaxPositions,
		"rms_norm_eps":            c.RMSNormEps,
		"rope_theta":              c.RopeTheta,
		"tie_word_embeddings":     c.TieWordEmbeddings,
		"hidden_act":              "silu",
		"attention_bias":          false,
		"bos_token_id":            c.BOSTokenID,
		"eos_token_id":            c.EOSTokenID,
		"torch_dtype":             dtype,
	}
	if !c.QKNorm {
		m["mlp_bias"] = false
	}
	return m
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("tinymodel: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("tinymodel: %w", err)
	}
	return nil
}
