package main

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/tensor"
)

// Gemma 4 in llama.cpp's gemma4 GGUF names: the per-layer embedding and
// its projection from the hidden state, per layer the sandwich norms, the
// per-layer input gate and projection and the output scale, q/k norms,
// keys and values only in the layers that do not share them, and one
// rope_freqs tensor of divisors for the full layers' proportional RoPE.

// gemma4Full reports whether layer l is a full-attention layer.
func (s shape) gemma4Full(l int) bool { return (l+1)%s.gemma4.fullEvery == 0 }

// gemma4FFN is layer l's feed-forward width.
func (s shape) gemma4FFN(l int) int {
	if l >= s.layers-s.gemma4.kvShared {
		return 2 * s.ffn
	}
	return s.ffn
}

// gemma4Tensors lays out every tensor of a Gemma 4 shape.
func (g *gen) gemma4Tensors() []gguf.WriteTensor {
	s, g4 := g.s, g.s.gemma4
	H, V, P, L := int64(s.hidden), int64(s.vocab), int64(g4.perLayer), int64(s.layers)
	// the full layers' pairs: the first quarter turn, the rest are divided
	// by 1e30 and stand still
	pairs := g4.globalHeadDim / 2
	freqs := g.ones(pairs)
	for i := pairs / 4; i < pairs; i++ {
		freqs[i] = 1e30
	}
	ts := []gguf.WriteTensor{
		{Name: "rope_freqs.weight", DType: tensor.F32, Shape: []int64{int64(pairs)}, Values: freqs},
		g.mat("token_embd.weight", V, H),
		g.mat("per_layer_token_embd.weight", V, L*P),
		g.mat("per_layer_model_proj.weight", L*P, H),
		g.vec("per_layer_proj_norm.weight", P, 1),
		g.vec("output_norm.weight", H, 1),
	}
	for l := 0; l < s.layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		E := int64(s.headDm)
		if s.gemma4Full(l) {
			E = int64(g4.globalHeadDim)
		}
		q, kv, F := int64(s.heads)*E, int64(s.kvHeads)*E, int64(s.gemma4FFN(l))
		ts = append(ts,
			g.vec(p+"attn_norm.weight", H, 1), g.vec(p+"layer_output_scale.weight", 1, 1),
			g.mat(p+"attn_q.weight", q, H), g.vec(p+"attn_q_norm.weight", E, 1), g.mat(p+"attn_output.weight", H, q),
			g.vec(p+"post_attention_norm.weight", H, 1), g.vec(p+"ffn_norm.weight", H, 1),
			g.mat(p+"ffn_gate.weight", F, H), g.mat(p+"ffn_up.weight", F, H), g.mat(p+"ffn_down.weight", H, F),
			g.vec(p+"post_ffw_norm.weight", H, 1),
			g.mat(p+"inp_gate.weight", P, H), g.mat(p+"proj.weight", H, P), g.vec(p+"post_norm.weight", H, 1))
		if l < s.layers-g4.kvShared {
			ts = append(ts, g.mat(p+"attn_k.weight", kv, H), g.mat(p+"attn_v.weight", kv, H), g.vec(p+"attn_k_norm.weight", E, 1))
		}
	}
	return ts
}

// gemma4Metadata is a Gemma 4 shape's hyper-parameters.
func (g *gen) gemma4Metadata(kv []gguf.KV) []gguf.KV {
	s, g4 := g.s, g.s.gemma4
	a := s.arch
	ffn := make([]any, s.layers)
	swa := make([]any, s.layers)
	for l := range ffn {
		ffn[l], swa[l] = uint32(s.gemma4FFN(l)), !s.gemma4Full(l)
	}
	for i := range kv {
		if kv[i].Key == a+".feed_forward_length" {
			kv[i].Value = ffn // one a layer
		}
	}
	return append(kv,
		gguf.KV{Key: a + ".attention.head_count_kv", Value: uint32(s.kvHeads)},
		gguf.KV{Key: a + ".attention.key_length", Value: uint32(g4.globalHeadDim)},
		gguf.KV{Key: a + ".attention.value_length", Value: uint32(g4.globalHeadDim)},
		gguf.KV{Key: a + ".attention.key_length_swa", Value: uint32(s.headDm)},
		gguf.KV{Key: a + ".attention.value_length_swa", Value: uint32(s.headDm)},
		gguf.KV{Key: a + ".rope.dimension_count", Value: uint32(g4.globalHeadDim)},
		gguf.KV{Key: a + ".rope.dimension_count_swa", Value: uint32(s.headDm)},
		gguf.KV{Key: a + ".rope.freq_base", Value: float32(s.theta)},
		gguf.KV{Key: a + ".rope.freq_base_swa", Value: float32(g4.swaTheta)},
		gguf.KV{Key: a + ".attention.layer_norm_rms_epsilon", Value: float32(1e-6)},
		gguf.KV{Key: a + ".attention.sliding_window", Value: uint32(g4.window)},
		gguf.KV{Key: a + ".attention.sliding_window_pattern", Value: swa},
		gguf.KV{Key: a + ".attention.shared_kv_layers", Value: uint32(g4.kvShared)},
		gguf.KV{Key: a + ".embedding_length_per_layer_input", Value: uint32(g4.perLayer)},
		gguf.KV{Key: a + ".final_logit_softcapping", Value: float32(g4.softcap)},
		gguf.KV{Key: a + ".vocab_size", Value: uint32(s.vocab)})
}
