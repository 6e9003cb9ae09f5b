package tinymodel

import (
	"fmt"
	"strings"

	"github.com/aotlm/aotlm/internal/format/llama2c"
)

// WriteLlama2C writes the random model (cfg, seed) as a llama2.c file of
// the given version (0, 1 or 2) at path. q and k rows are reordered from
// Hugging Face's rotate-half RoPE layout to llama2.c's interleaved one
// (see Interleave), so both files compute the same function. llama2.c
// fixes head_dim = hidden/heads, rope theta 10000 and eps 1e-5; other
// configurations are refused. The classifier is shared when
// cfg.TieWordEmbeddings is set; seq_len is cfg.MaxPositions.
func WriteLlama2C(path string, cfg Config, seed int64, version int) error {
	cfg = cfg.withDefaults()
	if cfg.QKNorm {
		return fmt.Errorf("tinymodel: llama2.c has no q/k norms (QKNorm)")
	}
	if cfg.NumHeads > 0 && cfg.HeadDim*cfg.NumHeads != cfg.HiddenSize {
		return fmt.Errorf("tinymodel: llama2.c needs head_dim = hidden/heads, have %d", cfg.HeadDim)
	}
	if cfg.RopeTheta != llama2c.RopeTheta || cfg.RMSNormEps != 1e-5 {
		return fmt.Errorf("tinymodel: llama2.c fixes rope theta 10000 and eps 1e-5, have %g and %g", cfg.RopeTheta, cfg.RMSNormEps)
	}
	weights, err := Llama(cfg, seed)
	if err != nil {
		return err
	}
	meta := map[string][]float32{}
	for name, w := range weights {
		mname := metaName(name)
		v := w.Data
		switch {
		case strings.HasSuffix(name, "q_proj.weight"):
			v = Interleave(v, cfg.NumHeads, cfg.HeadDim, cfg.HiddenSize)
		case strings.HasSuffix(name, "k_proj.weight"):
			v = Interleave(v, cfg.NumKVHeads, cfg.HeadDim, cfg.HiddenSize)
		}
		meta[mname] = v
	}
	lc := llama2c.Config{Dim: cfg.HiddenSize, HiddenDim: cfg.IntermediateSize, NLayers: cfg.NumLayers,
		NHeads: cfg.NumHeads, NKVHeads: cfg.NumKVHeads, VocabSize: cfg.VocabSize, SeqLen: cfg.MaxPositions,
		SharedClassifier: cfg.TieWordEmbeddings}
	switch version {
	case 0:
		return llama2c.WriteV0(path, lc, meta)
	case 1:
		return llama2c.WriteV1(path, lc, meta)
	case 2:
		return llama2c.WriteV2(path, lc, meta)
	}
	return fmt.Errorf("tinymodel: llama2.c version %d, want 0, 1 or 2", version)
}

// metaName maps a Hugging Face Llama weight name to its llama2.c (Meta) name.
func metaName(hf string) string {
	r := strings.NewReplacer(
		"model.embed_tokens.", "tok_embeddings.",
		"model.layers.", "layers.",
		"input_layernorm.", "attention_norm.",
		"post_attention_layernorm.", "ffn_norm.",
		"self_attn.q_proj.", "attention.wq.",
		"self_attn.k_proj.", "attention.wk.",
		"self_attn.v_proj.", "attention.wv.",
		"self_attn.o_proj.", "attention.wo.",
		"mlp.gate_proj.", "feed_forward.w1.",
		"mlp.down_proj.", "feed_forward.w2.",
		"mlp.up_proj.", "feed_forward.w3.",
		"model.norm.", "norm.",
		"lm_head.", "output.",
	)
	return r.Replace(hf)
}

// Interleave reorders the rows of a q or k projection w [heads*headDim,
// cols] (len(w) must be heads*headDim*cols) from rotate-half RoPE order (row i pairs with row i+headDim/2
// within a head) to interleaved order (row 2i pairs with 2i+1):
//
//	out[h*headDim + 2i]   = w[h*headDim + i]
//	out[h*headDim + 2i+1] = w[h*headDim + headDim/2 + i]   for i < headDim/2
func Interleave(w []float32, heads, headDim, cols int) []float32 {
	out := make([]float32, len(w))
	half := headDim / 2
	for h := range heads {
		for i := range half {
			src0 := (h*headDim + i) * cols
			src1 := (h*headDim + half + i) * cols
			dst := (h*headDim + 2*i) * cols
			copy(out[dst:dst+cols], w[src0:src0+cols])
			copy(out[dst+cols:dst+2*cols], w[src1:src1+cols])
		}
	}
	return out
}
