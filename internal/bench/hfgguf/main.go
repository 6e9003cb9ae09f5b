// Command hfgguf writes a Hugging Face Llama folder (config.json,
// safetensors weights and a SentencePiece tokenizer.model) as a float32
// GGUF file in llama.cpp's layout, so llama.cpp's tools (llama-quantize,
// llama-perplexity) and aotlm read the same weights:
//
//	go run ./internal/bench/hfgguf -i MODEL_FOLDER -o model-f32.gguf
//
// The query and key projections are permuted from Hugging Face's
// rotate-half order to llama.cpp's interleaved rotary pairs, as llama.cpp's
// own converter does; every other tensor is copied as it is, in float32.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

func main() {
	in := flag.String("i", "", "Hugging Face Llama folder")
	out := flag.String("o", "", "output GGUF file")
	flag.Parse()
	if *in == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: hfgguf -i MODEL_FOLDER -o OUT.gguf")
		os.Exit(2)
	}
	if err := convert(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "hfgguf:", err)
		os.Exit(1)
	}
}

// llamaConfig is the part of config.json the GGUF header needs.
type llamaConfig struct {
	hidden, layers, ffn, heads, kvHeads, headDim, vocab, ctx int
	eps, theta                                               float64
}

func readConfig(meta map[string]any) (llamaConfig, error) {
	var c llamaConfig
	ints := []struct {
		key string
		dst *int
	}{{"hidden_size", &c.hidden}, {"num_hidden_layers", &c.layers}, {"intermediate_size", &c.ffn},
		{"num_attention_heads", &c.heads}, {"vocab_size", &c.vocab}, {"max_position_embeddings", &c.ctx}}
	for _, f := range ints {
		v, ok := format.MetaInt(meta, f.key)
		if !ok || v <= 0 {
			return c, fmt.Errorf("config.json: %s missing or not a positive integer", f.key)
		}
		*f.dst = int(v)
	}
	if mt, _ := meta["model_type"].(string); mt != "llama" {
		return c, fmt.Errorf("config.json: model_type %q: only llama is converted", mt)
	}
	c.kvHeads = c.heads
	if v, ok := format.MetaInt(meta, "num_key_value_heads"); ok && v > 0 {
		c.kvHeads = int(v)
	}
	c.headDim = c.hidden / c.heads
	if v, ok := format.MetaInt(meta, "head_dim"); ok && v > 0 {
		c.headDim = int(v)
	}
	c.eps, c.theta = 1e-5, 10000
	if v, ok := meta["rms_norm_eps"].(float64); ok {
		c.eps = v
	}
	if v, ok := meta["rope_theta"].(float64); ok {
		c.theta = v
	}
	if rs, ok := meta["rope_scaling"]; ok && rs != nil {
		return c, fmt.Errorf("config.json: rope_scaling is not converted")
	}
	return c, nil
}

// ggufName maps a Hugging Face Llama tensor name to llama.cpp's, with the
// number of heads whose rotary halves must be interleaved (0: none).
func ggufName(name string, c llamaConfig) (string, int, error) {
	switch name {
	case "model.embed_tokens.weight":
		return "token_embd.weight", 0, nil
	case "model.norm.weight":
		return "output_norm.weight", 0, nil
	case "lm_head.weight":
		return "output.weight", 0, nil
	}
	var l int
	var rest string
	if _, err := fmt.Sscanf(name, "model.layers.%d.%s", &l, &rest); err != nil {
		return "", 0, fmt.Errorf("tensor %q: not a Llama tensor name", name)
	}
	p := fmt.Sprintf("blk.%d.", l)
	switch rest {
	case "input_layernorm.weight":
		return p + "attn_norm.weight", 0, nil
	case "post_attention_layernorm.weight":
		return p + "ffn_norm.weight", 0, nil
	case "self_attn.q_proj.weight":
		return p + "attn_q.weight", c.heads, nil
	case "self_attn.k_proj.weight":
		return p + "attn_k.weight", c.kvHeads, nil
	case "self_attn.v_proj.weight":
		return p + "attn_v.weight", 0, nil
	case "self_attn.o_proj.weight":
		return p + "attn_output.weight", 0, nil
	case "mlp.gate_proj.weight":
		return p + "ffn_gate.weight", 0, nil
	case "mlp.up_proj.weight":
		return p + "ffn_up.weight", 0, nil
	case "mlp.down_proj.weight":
		return p + "ffn_down.weight", 0, nil
	}
	return "", 0, fmt.Errorf("tensor %q: not a Llama tensor name", name)
}

// interleave reorders the rows of a [heads*headDim, cols] projection from
// rotate-half order (within a head, the first half of the rows pairs with
// the second) to adjacent pairs: row h·d + a·d/2 + i moves to h·d + 2i + a.
func interleave(w []float32, heads, cols int) ([]float32, error) {
	rows := len(w) / cols
	if heads <= 0 || rows%heads != 0 || (rows/heads)%2 != 0 {
		return nil, fmt.Errorf("%d rows do not split into %d heads of an even width", rows, heads)
	}
	d := rows / heads
	out := make([]float32, len(w))
	for h := 0; h < heads; h++ {
		for a := 0; a < 2; a++ {
			for i := 0; i < d/2; i++ {
				src := h*d + a*d/2 + i
				dst := h*d + 2*i + a
				copy(out[dst*cols:(dst+1)*cols], w[src*cols:(src+1)*cols])
			}
		}
	}
	return out, nil
}

func vocabKV(sp *tokenizer.SentencePiece) []gguf.KV {
	n := sp.VocabSize()
	toks, scores, types := make([]any, n), make([]any, n), make([]any, n)
	for i := 0; i < n; i++ {
		toks[i], scores[i], types[i] = sp.Token(i), sp.Score(i), int32(sp.Type(i))
	}
	kv := []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "llama"},
		{Key: "tokenizer.ggml.tokens", Value: toks},
		{Key: "tokenizer.ggml.scores", Value: scores},
		{Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.unknown_token_id", Value: uint32(max(sp.Unknown(), 0))},
		{Key: "tokenizer.ggml.add_bos_token", Value: true},
		{Key: "tokenizer.ggml.add_eos_token", Value: false},
	}
	if b := sp.BOS(); b >= 0 {
		kv = append(kv, gguf.KV{Key: "tokenizer.ggml.bos_token_id", Value: uint32(b)})
	}
	if e := sp.EOS(); e >= 0 {
		kv = append(kv, gguf.KV{Key: "tokenizer.ggml.eos_token_id", Value: uint32(e)})
	}
	return kv
}

func convert(in, out string) error {
	ck, err := safetensors.OpenDir(in)
	if err != nil {
		return err
	}
	defer ck.Close()
	c, err := readConfig(ck.Metadata())
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	sp, err := tokenizer.LoadSentencePiece(filepath.Join(in, "tokenizer.model"))
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if sp.VocabSize() != c.vocab {
		return fmt.Errorf("%s: tokenizer.model has %d pieces, config.json vocab_size %d", in, sp.VocabSize(), c.vocab)
	}
	a := "llama"
	kv := []gguf.KV{
		{Key: "general.architecture", Value: a},
		{Key: "general.name", Value: filepath.Base(filepath.Clean(in))},
		{Key: "general.file_type", Value: uint32(0)},
		{Key: a + ".block_count", Value: uint32(c.layers)},
		{Key: a + ".context_length", Value: uint32(c.ctx)},
		{Key: a + ".embedding_length", Value: uint32(c.hidden)},
		{Key: a + ".feed_forward_length", Value: uint32(c.ffn)},
		{Key: a + ".attention.head_count", Value: uint32(c.heads)},
		{Key: a + ".attention.head_count_kv", Value: uint32(c.kvHeads)},
		{Key: a + ".attention.key_length", Value: uint32(c.headDim)},
		{Key: a + ".attention.value_length", Value: uint32(c.headDim)},
		{Key: a + ".rope.dimension_count", Value: uint32(c.headDim)},
		{Key: a + ".rope.freq_base", Value: float32(c.theta)},
		{Key: a + ".attention.layer_norm_rms_epsilon", Value: float32(c.eps)},
		{Key: a + ".vocab_size", Value: uint32(c.vocab)},
	}
	kv = append(kv, vocabKV(sp)...)

	var ts []gguf.WriteTensor
	for _, t := range ck.Tensors() {
		name, heads, err := ggufName(t.Name, c)
		if err != nil {
			return fmt.Errorf("%s: %w", in, err)
		}
		v, err := ck.ReadFloat32(t.Name)
		if err != nil {
			return fmt.Errorf("%s: %w", in, err)
		}
		if heads > 0 {
			if v, err = interleave(v, heads, int(t.Shape[len(t.Shape)-1])); err != nil {
				return fmt.Errorf("%s: tensor %q: %w", in, t.Name, err)
			}
		}
		ts = append(ts, gguf.WriteTensor{Name: name, DType: tensor.F32, Shape: t.Shape, Values: v})
	}

	return gguf.WriteFile(out, kv, ts)
}
