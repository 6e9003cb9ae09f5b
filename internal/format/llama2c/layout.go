package llama2c

import "fmt"

// slot is one tensor in a file layout.
type slot struct {
	name  string
	shape []int64
	quant bool // int8 values followed by float32 group scales (version 2)
}

// numel is the element count of s.
func (s slot) numel() int64 {
	n := int64(1)
	for _, d := range s.shape {
		n *= d
	}
	return n
}

// bytes is the stored size of s for group size g.
func (s slot) bytes(g int) int64 {
	if s.quant {
		return s.numel() + 4*(s.numel()/int64(g))
	}
	return 4 * s.numel()
}

// Tensor names, with %d for the layer.
const (
	nameEmbed    = "tok_embeddings.weight"
	nameAttnNorm = "layers.%d.attention_norm.weight"
	nameWQ       = "layers.%d.attention.wq.weight"
	nameWK       = "layers.%d.attention.wk.weight"
	nameWV       = "layers.%d.attention.wv.weight"
	nameWO       = "layers.%d.attention.wo.weight"
	nameFFNNorm  = "layers.%d.ffn_norm.weight"
	nameW1       = "layers.%d.feed_forward.w1.weight"
	nameW2       = "layers.%d.feed_forward.w2.weight"
	nameW3       = "layers.%d.feed_forward.w3.weight"
	nameNorm     = "norm.weight"
	nameOutput   = "output.weight"
	// NameFreqReal and NameFreqImag are the RoPE cos and sin tables
	// [seq_len, head_size/2] of version 0 files.
	NameFreqReal = "freq_cis_real"
	NameFreqImag = "freq_cis_imag"
)

// layout lists the tensors of a file of the given version in file order.
// Sizes are bounded by Config.validate, so no product overflows int64.
func layout(c Config, version int) []slot {
	D, H, V, KV := int64(c.Dim), int64(c.HiddenDim), int64(c.VocabSize), int64(c.KVDim())
	quant := version == 2
	perLayer := func(pattern string, q bool, shape ...int64) []slot {
		out := make([]slot, c.NLayers)
		for i := range out {
			out[i] = slot{fmt.Sprintf(pattern, i), shape, q}
		}
		return out
	}
	embed := slot{nameEmbed, []int64{V, D}, quant}
	norm := slot{nameNorm, []int64{D}, false}
	attnNorm := perLayer(nameAttnNorm, false, D)
	ffnNorm := perLayer(nameFFNNorm, false, D)
	mats := [][]slot{
		perLayer(nameWQ, quant, D, D),
		perLayer(nameWK, quant, KV, D),
		perLayer(nameWV, quant, KV, D),
		perLayer(nameWO, quant, D, D),
	}
	ffn := [][]slot{
		perLayer(nameW1, quant, H, D),
		perLayer(nameW2, quant, D, H),
		perLayer(nameW3, quant, H, D),
	}
	var out []slot
	switch version {
	case 0:
		out = append(out, embed)
		out = append(out, attnNorm...)
		for _, m := range mats {
			out = append(out, m...)
		}
		out = append(out, ffnNorm...)
		for _, m := range ffn {
			out = append(out, m...)
		}
		half := int64(c.HeadSize() / 2)
		out = append(out, norm,
			slot{NameFreqReal, []int64{int64(c.SeqLen), half}, false},
			slot{NameFreqImag, []int64{int64(c.SeqLen), half}, false})
	default: // 1 and 2 share the order; 2 quantizes the matrices
		out = append(out, attnNorm...)
		out = append(out, ffnNorm...)
		out = append(out, norm, embed)
		for _, m := range append(mats, ffn...) {
			out = append(out, m...)
		}
	}
	if !c.SharedClassifier {
		out = append(out, slot{nameOutput, []int64{V, D}, quant})
	}
	return out
}
