package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/tensor"
)

// gen lays out one shape's tensors and metadata in llama.cpp's GGUF
// names for its architecture.
type gen struct {
	s       shape
	randF16 func(n int) func(io.Writer) error
	randF32 func(n int) func(io.Writer) error
	ones    func(n int) []float32
}

// mat is a random binary16 matrix of rows x cols.
func (g *gen) mat(name string, rows, cols int64) gguf.WriteTensor {
	return gguf.WriteTensor{Name: name, DType: tensor.F16, Shape: []int64{rows, cols}, Stream: g.randF16(int(rows * cols))}
}

// vec is a float32 vector of n copies of v.
func (g *gen) vec(name string, n int64, v float32) gguf.WriteTensor {
	vals := g.ones(int(n))
	for i := range vals {
		vals[i] *= v
	}
	return gguf.WriteTensor{Name: name, DType: tensor.F32, Shape: []int64{n}, Values: vals}
}

// attention is a full-attention block's projections; gated doubles the
// query rows (Qwen3.5's [query | gate] per head).
func (g *gen) attention(p string, gated bool) []gguf.WriteTensor {
	return append(g.projections(p, gated), g.qkNorms(p)...)
}

// projections are the q, k, v and output projections of attention.
func (g *gen) projections(p string, gated bool) []gguf.WriteTensor {
	s := g.s
	H, E := int64(s.hidden), int64(s.headDm)
	q, kv := int64(s.heads)*E, int64(s.kvHeads)*E
	qRows := q
	if gated {
		qRows = 2 * q
	}
	return []gguf.WriteTensor{g.mat(p+"attn_q.weight", qRows, H), g.mat(p+"attn_k.weight", kv, H), g.mat(p+"attn_v.weight", kv, H),
		g.mat(p+"attn_output.weight", H, q)}
}

// qkNorms are the per-head query and key norms, where the shape has them.
func (g *gen) qkNorms(p string) []gguf.WriteTensor {
	if !g.s.qkNorm {
		return nil
	}
	E := int64(g.s.headDm)
	return []gguf.WriteTensor{g.vec(p+"attn_q_norm.weight", E, 1), g.vec(p+"attn_k_norm.weight", E, 1)}
}

// mlp is a SwiGLU feed-forward block.
func (g *gen) mlp(p string) []gguf.WriteTensor {
	H, F := int64(g.s.hidden), int64(g.s.ffn)
	return []gguf.WriteTensor{g.mat(p+"ffn_gate.weight", F, H), g.mat(p+"ffn_up.weight", F, H), g.mat(p+"ffn_down.weight", H, F)}
}

// tensors lays out every tensor of the shape.
func (g *gen) tensors() []gguf.WriteTensor {
	s := g.s
	if s.gemma4 != nil {
		return g.gemma4Tensors()
	}
	H := int64(s.hidden)
	ts := []gguf.WriteTensor{g.mat("token_embd.weight", int64(s.vocab), H)}
	switch {
	case s.deltaNet != nil:
		ts = append(ts, g.vec("output_norm.weight", H, 1), g.mat("output.weight", int64(s.vocab), H))
	case s.attnLayers != nil:
		ts = append(ts, g.vec("token_embd_norm.weight", H, 1))
	default:
		ts = append(ts, g.vec("output_norm.weight", H, 1))
		if s.untied {
			ts = append(ts, g.mat("output.weight", int64(s.vocab), H))
		}
	}
	for l := 0; l < s.layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		ts = append(ts, g.vec(p+"attn_norm.weight", H, 1))
		if s.deltaNet == nil && s.attnLayers == nil {
			ts = append(ts, g.projections(p, false)...)
			if s.qkvBias {
				q, kv := int64(s.heads*s.headDm), int64(s.kvHeads*s.headDm)
				ts = append(ts, g.vec(p+"attn_q.bias", q, 0), g.vec(p+"attn_k.bias", kv, 0), g.vec(p+"attn_v.bias", kv, 0))
			}
			ts = append(ts, g.vec(p+"ffn_norm.weight", H, 1))
			ts = append(ts, g.mlp(p)...)
			ts = append(ts, g.qkNorms(p)...)
			continue
		}
		ts = append(ts, g.mlp(p)...)
		switch {
		case s.deltaNet != nil:
			ts = append(ts, g.vec(p+"post_attention_norm.weight", H, 1))
			if (l+1)%s.deltaNet.attnEvery == 0 {
				ts = append(ts, g.attention(p, true)...)
			} else {
				ts = append(ts, g.deltaNetLayer(p)...)
			}
		case s.attnLayers != nil:
			ts = append(ts, g.vec(p+"ffn_norm.weight", H, 1))
			if slices.Contains(s.attnLayers, l) {
				ts = append(ts, g.attention(p, false)...)
			} else {
				C := int64(s.convCache)
				ts = append(ts, gguf.WriteTensor{Name: p + "shortconv.conv.weight", DType: tensor.F32, Shape: []int64{H, C}, Values: g.ones(int(H * C))},
					g.mat(p+"shortconv.in_proj.weight", 3*H, H), g.mat(p+"shortconv.out_proj.weight", H, H))
			}
		}
	}
	return ts
}

// deltaNetLayer is a Qwen3.5 gated DeltaNet block: the fused q/k/v
// projection and its causal convolution, the output gate z, the decay
// (a, alpha, dt) and update (beta) inputs, the gated norm and the output.
func (g *gen) deltaNetLayer(p string) []gguf.WriteTensor {
	d, H := g.s.deltaNet, int64(g.s.hidden)
	inner := int64(d.valueHeads * d.valueDim)
	conv := 2*int64(d.keyHeads*d.keyDim) + inner
	Vh, K := int64(d.valueHeads), int64(d.convKernel)
	return []gguf.WriteTensor{
		g.mat(p+"attn_qkv.weight", conv, H), g.mat(p+"attn_gate.weight", inner, H),
		{Name: p + "ssm_conv1d.weight", DType: tensor.F32, Shape: []int64{conv, K}, Values: g.ones(int(conv * K))},
		g.vec(p+"ssm_a", Vh, -1), g.vec(p+"ssm_dt.bias", Vh, 0),
		g.mat(p+"ssm_alpha.weight", Vh, H), g.mat(p+"ssm_beta.weight", Vh, H),
		g.vec(p+"ssm_norm.weight", int64(d.valueDim), 1), g.mat(p+"ssm_out.weight", H, inner),
	}
}

// metadata is the architecture's hyper-parameters and the vocabulary.
func (g *gen) metadata() []gguf.KV {
	s := g.s
	a := s.arch
	kv := []gguf.KV{
		{Key: "general.architecture", Value: a},
		{Key: "general.name", Value: "random " + a},
		{Key: a + ".block_count", Value: uint32(s.layers)},
		{Key: a + ".context_length", Value: uint32(4096)},
		{Key: a + ".embedding_length", Value: uint32(s.hidden)},
		{Key: a + ".feed_forward_length", Value: uint32(s.ffn)},
		{Key: a + ".attention.head_count", Value: uint32(s.heads)},
	}
	if s.gemma4 != nil {
		return append(g.gemma4Metadata(kv), vocab(s.vocab)...)
	}
	if s.deltaNet == nil && s.attnLayers == nil {
		kv = append(kv,
			gguf.KV{Key: a + ".attention.head_count_kv", Value: uint32(s.kvHeads)},
			gguf.KV{Key: a + ".attention.key_length", Value: uint32(s.headDm)},
			gguf.KV{Key: a + ".attention.value_length", Value: uint32(s.headDm)},
			gguf.KV{Key: a + ".rope.dimension_count", Value: uint32(s.headDm)},
			gguf.KV{Key: a + ".rope.freq_base", Value: float32(s.theta)},
			gguf.KV{Key: a + ".attention.layer_norm_rms_epsilon", Value: float32(1e-6)},
			gguf.KV{Key: a + ".vocab_size", Value: uint32(s.vocab)})
		if s.vision != nil {
			return append(kv, vocab(s.vocab, visionMarkers...)...)
		}
		return append(kv, vocab(s.vocab)...)
	}
	kv = append(kv, gguf.KV{Key: a + ".rope.freq_base", Value: float32(s.theta)}, gguf.KV{Key: a + ".vocab_size", Value: uint32(s.vocab)})
	switch {
	case s.attnLayers != nil:
		perLayer := make([]any, s.layers)
		for l := range perLayer {
			perLayer[l] = uint32(0)
			if slices.Contains(s.attnLayers, l) {
				perLayer[l] = uint32(s.kvHeads)
			}
		}
		kv = append(kv, gguf.KV{Key: a + ".attention.head_count_kv", Value: perLayer},
			gguf.KV{Key: a + ".attention.layer_norm_rms_epsilon", Value: float32(1e-5)},
			gguf.KV{Key: a + ".shortconv.l_cache", Value: uint32(s.convCache)})
	default:
		kv = append(kv, gguf.KV{Key: a + ".attention.head_count_kv", Value: uint32(s.kvHeads)},
			gguf.KV{Key: a + ".attention.key_length", Value: uint32(s.headDm)},
			gguf.KV{Key: a + ".attention.value_length", Value: uint32(s.headDm)},
			gguf.KV{Key: a + ".attention.layer_norm_rms_epsilon", Value: float32(1e-6)})
	}
	if d := s.deltaNet; d != nil {
		half := d.ropeDims / 2 // rotary pairs, split over M-RoPE's three sections
		kv = append(kv,
			gguf.KV{Key: a + ".rope.dimension_count", Value: uint32(d.ropeDims)},
			gguf.KV{Key: a + ".rope.dimension_sections", Value: []any{int32(half - 2*(half*3/8)), int32(half * 3 / 8), int32(half * 3 / 8), int32(0)}},
			gguf.KV{Key: a + ".full_attention_interval", Value: uint32(d.attnEvery)},
			gguf.KV{Key: a + ".ssm.conv_kernel", Value: uint32(d.convKernel)},
			gguf.KV{Key: a + ".ssm.state_size", Value: uint32(d.keyDim)},
			gguf.KV{Key: a + ".ssm.group_count", Value: uint32(d.keyHeads)},
			gguf.KV{Key: a + ".ssm.time_step_rank", Value: uint32(d.valueHeads)},
			gguf.KV{Key: a + ".ssm.inner_size", Value: uint32(d.valueHeads * d.valueDim)})
	}
	return append(kv, vocab(s.vocab)...)
}
