// Command shapegen writes a random-weight GGUF model with the dimensions
// of a real one, for speed comparisons where the weights do not matter
// (docs/benchmarks.md): the same file feeds aotlm (quantize, compile,
// bench) and llama.cpp (llama-quantize, llama-bench), so both run exactly
// the same shape.
//
//	go run ./internal/bench/shapegen -shape qwen3-0.6b -o qwen3-0.6b-f16.gguf
//
// The weights are N(0, 0.02) in binary16 (norm gains 1); the vocabulary
// is a synthetic byte-level one of the model's size (256 byte tokens and
// numbered fillers, no merges), enough for tools that feed random ids.
//
// A family llama.cpp cannot run (codegen2-1b) is written as a Hugging Face
// folder instead (-o names the folder: config.json and model.safetensors,
// no tokenizer), which only aotlm reads.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sort"

	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/tensor"
)

// shape is a model's dimensions.
type shape struct {
	arch                   string // llama.cpp architecture key
	hidden, layers, ffn    int
	heads, kvHeads, headDm int
	vocab                  int
	theta                  float64
	qkNorm                 bool
	qkvBias                bool // q, k and v projections with biases (qwen2)
	untied                 bool // a classifier of its own (output.weight)
	rotary                 int  // rotary dimensions of a head (codegen)
	// deltaNet: a Qwen3.5 hybrid (gated DeltaNet layers, a gated
	// full-attention layer every attnEvery layers).
	deltaNet *deltaNetShape
	// attnLayers: an LFM2 hybrid, these layers attention and the others
	// short convolutions of convCache taps.
	attnLayers []int
	convCache  int
	// gemma4: a Gemma 4 model's per-layer inputs, layer types and shared
	// keys and values.
	gemma4 *gemma4Shape
	// vision: an InternVL model, this shape its language model; written
	// as a folder of text.gguf and mmproj.gguf.
	vision *visionShape
}

// gemma4Shape is what a Gemma 4 model adds: every fullEvery-th layer is
// full attention with heads of globalHeadDim (theta, a quarter of its
// pairs rotating), the others sliding-window attention over window tokens
// with heads of headDm (swaTheta); the last kvShared layers reuse earlier
// layers' keys and values and have a feed-forward twice ffn wide; each
// layer takes a perLayer-wide input from a per-layer embedding; logits are
// capped at softcap*tanh(logits/softcap).
type gemma4Shape struct {
	globalHeadDim, perLayer int
	fullEvery, window       int
	kvShared                int
	swaTheta, softcap       float64
}

// deltaNetShape is a Qwen3.5 model's linear-attention dimensions.
type deltaNetShape struct {
	attnEvery, ropeDims  int
	keyHeads, keyDim     int // the q and k heads and their width
	valueHeads, valueDim int
	convKernel           int
}

var shapes = map[string]shape{
	"smollm2-135m": {arch: "llama", hidden: 576, layers: 30, ffn: 1536, heads: 9, kvHeads: 3, headDm: 64, vocab: 49152, theta: 1e5},
	"qwen3-0.6b":   {arch: "qwen3", hidden: 1024, layers: 28, ffn: 3072, heads: 16, kvHeads: 8, headDm: 128, vocab: 151936, theta: 1e6, qkNorm: true},
	"llama3.2-1b":  {arch: "llama", hidden: 2048, layers: 16, ffn: 8192, heads: 32, kvHeads: 8, headDm: 64, vocab: 128256, theta: 5e5},
	"llama3.2-3b":  {arch: "llama", hidden: 3072, layers: 28, ffn: 8192, heads: 24, kvHeads: 8, headDm: 128, vocab: 128256, theta: 5e5},
	// Phi-4-mini's dimensions (3.8B parameters, tied embeddings) in the
	// llama layout: separate q/k/v and gate/up tensors instead of phi3's
	// fused ones, and plain RoPE instead of longrope; the tensor sizes that
	// quantize and compile stream are the same.
	"phi4-mini": {arch: "llama", hidden: 3072, layers: 32, ffn: 8192, heads: 24, kvHeads: 8, headDm: 128, vocab: 200064, theta: 1e4},
	// Qwen3.5-0.8B: 24 layers, a gated full-attention layer (8 heads of
	// 256, 2 KV heads, rotary on a quarter of each head) every fourth,
	// gated DeltaNet layers of 16 key and 16 value heads of 128 between.
	"qwen3.5-0.8b": {arch: "qwen35", hidden: 1024, layers: 24, ffn: 3584, heads: 8, kvHeads: 2, headDm: 256, vocab: 248320, theta: 1e7, qkNorm: true,
		deltaNet: &deltaNetShape{attnEvery: 4, ropeDims: 64, keyHeads: 16, keyDim: 128, valueHeads: 16, valueDim: 128, convKernel: 4}},
	// LFM2-1.2B: 16 layers, 6 of them attention (32 heads of 64, 8 KV
	// heads), the others gated short convolutions of 3 taps.
	"lfm2-1.2b": {arch: "lfm2", hidden: 2048, layers: 16, ffn: 8192, heads: 32, kvHeads: 8, headDm: 64, vocab: 65536, theta: 1e6, qkNorm: true,
		attnLayers: []int{2, 5, 8, 10, 12, 14}, convCache: 3},
	// Salesforce/codegen2-1B's config: n_embd 2048, n_layer 16, n_head 16,
	// rotary_dim 64, n_inner null (4·n_embd), n_positions 2048, vocabulary
	// 51200, untied; an HF folder (writeCodegen).
	// google/gemma-4-E2B's text config: hidden 1536, 35 layers (every
	// fifth full attention), 8 heads and 1 KV head of 256 (sliding, window
	// 512) or 512 (full), FFN 6144 and 12288 in the 20 layers that share
	// keys and values, per-layer inputs of 256, vocabulary 262144, tied,
	// final logits capped at 30. The 20 sharing layers are the config's
	// num_kv_shared_layers: 20 in mlx-lm's models/gemma4_text.py, whose
	// ModelArgs defaults are E2B's (hidden 1536, 35 layers,
	// use_double_wide_mlp true); llama.cpp's converter
	// (conversion/gemma.py) writes it as attention.shared_kv_layers and
	// doubles the FFN from layer num_hidden_layers-num_kv_shared_layers.
	"gemma4-e2b": {arch: "gemma4", hidden: 1536, layers: 35, ffn: 6144, heads: 8, kvHeads: 1, headDm: 256, vocab: 262144, theta: 1e6, qkNorm: true,
		gemma4: &gemma4Shape{globalHeadDim: 512, perLayer: 256, fullEvery: 5, window: 512, kvShared: 20, swaTheta: 1e4, softcap: 30}},
	// OpenGVLab/InternVL3-1B: InternViT-300M (448x448 tiles of 14x14
	// patches, 24 layers, hidden 1024, 16 heads, FFN 4096), pixel shuffle
	// by 2 (256 rows a tile), a 4096-896-896 projector, and Qwen2.5-0.5B
	// (hidden 896, 24 layers, 14/2 heads of 64 with q/k/v biases, FFN 4864,
	// vocabulary 151674, untied).
	"internvl3-1b": {arch: "qwen2", hidden: 896, layers: 24, ffn: 4864, heads: 14, kvHeads: 2, headDm: 64, vocab: 151674, theta: 1e6,
		qkvBias: true, untied: true,
		vision: &visionShape{hidden: 1024, layers: 24, ffn: 4096, heads: 16, image: 448, patch: 14, scale: 2, maxTiles: 12}},
	"codegen2-1b": {arch: "codegen", hidden: 2048, layers: 16, ffn: 8192, heads: 16, kvHeads: 16, headDm: 128, vocab: 51200, theta: 1e4, rotary: 64},
}

func main() {
	name := flag.String("shape", "qwen3-0.6b", "model shape: smollm2-135m, qwen3-0.6b, llama3.2-1b, llama3.2-3b, phi4-mini, qwen3.5-0.8b, lfm2-1.2b, gemma4-e2b, internvl3-1b or codegen2-1b")
	out := flag.String("o", "", "output GGUF file (codegen2-1b and internvl3-1b: output folder)")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	s, ok := shapes[*name]
	if !ok || *out == "" {
		var names []string
		for n := range shapes {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "shapegen: want -shape one of %v and -o FILE\n", names)
		os.Exit(2)
	}
	w := write
	switch {
	case s.arch == "codegen":
		w = writeCodegen
	case s.vision != nil:
		w = writeVisionPair
	}
	if err := w(*out, s, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "shapegen:", err)
		os.Exit(1)
	}
}

// write writes the model to path through a temporary file.
func write(path string, s shape, seed uint64) error {
	return writeGGUF(path, seed, func(g *gen) ([]gguf.WriteTensor, []gguf.KV) {
		g.s = s
		return g.tensors(), g.metadata()
	})
}

// writeGGUF writes the GGUF file that layout returns to path through a
// temporary file, its random values drawn from seed as the file is
// written.
func writeGGUF(path string, seed uint64, layout func(g *gen) ([]gguf.WriteTensor, []gguf.KV)) error {
	r := rand.New(rand.NewPCG(seed, 7))
	// randF16 writes n values when the writer reaches the tensor: the
	// draws happen in file order, and no more than a chunk is in memory
	randF16 := func(n int) func(io.Writer) error {
		return func(w io.Writer) error {
			b := make([]byte, 2*min(n, 1<<16))
			for left := n; left > 0; {
				k := min(left, len(b)/2)
				for i := 0; i < k; i++ {
					binary.LittleEndian.PutUint16(b[2*i:], tensor.F32ToF16(float32(r.NormFloat64()*0.02)))
				}
				if _, err := w.Write(b[:2*k]); err != nil {
					return err
				}
				left -= k
			}
			return nil
		}
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	// randF32 is randF16 for float32 values
	randF32 := func(n int) func(io.Writer) error {
		return func(w io.Writer) error {
			b := make([]byte, 4*min(n, 1<<16))
			for left := n; left > 0; {
				k := min(left, len(b)/4)
				for i := 0; i < k; i++ {
					binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(r.NormFloat64()*0.02)))
				}
				if _, err := w.Write(b[:4*k]); err != nil {
					return err
				}
				left -= k
			}
			return nil
		}
	}
	g := &gen{randF16: randF16, randF32: randF32, ones: ones}
	ts, kv2 := layout(g)

	return gguf.WriteFile(path, kv2, ts)
}

// vocab is a byte-level vocabulary of n tokens: the 256 byte symbols of
// GPT-2's mapping, then "t2" (the one merge, of "t" and "2", which
// llama.cpp wants at least one of), then fillers "t257".., the last one
// the end token. The control pieces, if any, take the ids just before the
// end token.
func vocab(n int, control ...string) []gguf.KV {
	toks := make([]any, n)
	types := make([]any, n)
	b := 0
	for c := 0; c < 256 && b < n; c++ {
		toks[b], types[b] = byteSymbol(c), int32(1)
		b++
	}
	for ; b < n; b++ {
		toks[b], types[b] = fmt.Sprintf("t%d", b), int32(1)
		if b == 256 {
			toks[b] = "t2"
		}
	}
	types[n-1] = int32(3)
	for i, c := range control {
		id := n - 1 - len(control) + i
		toks[id], types[id] = c, int32(3)
	}
	return []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "gpt2"},
		{Key: "tokenizer.ggml.pre", Value: "default"},
		{Key: "tokenizer.ggml.tokens", Value: toks},
		{Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.merges", Value: []any{"t 2"}},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(n - 1)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(n - 1)},
	}
}

// byteSymbol is GPT-2's printable stand-in for byte c.
func byteSymbol(c int) string {
	if (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF) {
		return string(rune(c))
	}
	// The other bytes map to 256.. in order.
	k := 0
	for d := 0; d < c; d++ {
		if !((d >= '!' && d <= '~') || (d >= 0xA1 && d <= 0xAC) || (d >= 0xAE && d <= 0xFF)) {
			k++
		}
	}
	return string(rune(256 + k))
}
