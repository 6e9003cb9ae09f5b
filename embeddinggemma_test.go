package aotlm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// The EmbeddingGemma fixture is the gemma3 fixture of arch/ (7 layers,
// hidden 64, every 6th layer global) made an encoder: bidirectional
// attention whose sliding layers see 4 positions on either side (a
// window of 8), q·k scaled by 1/sqrt(head_dim), no RoPE scaling, mean
// pooling, and the two dense projections of sentence-transformers
// (64 -> 256 -> 64, no bias) drawn from a seeded generator.
const (
	egHidden, egDense = 64, 256
	egWindow          = 8
)

// embeddingGemmaDense returns the fixture's dense projections, dense_2
// [256, 64] and dense_3 [64, 256] (rows are outputs), N(0, 1/fan_in).
func embeddingGemmaDense() (d2, d3 []float32) {
	r := rand.New(rand.NewPCG(2, 768))
	draw := func(n, fanIn int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() / math.Sqrt(float64(fanIn)))
		}
		return v
	}
	return draw(egDense*egHidden, egHidden), draw(egHidden*egDense, egDense)
}

// writeEmbeddingGemmaGGUF writes the fixture in the layout llama.cpp's
// converter gives EmbeddingGemma with its dense modules: architecture
// gemma-embedding, pooling_type 1 (mean), dense_2.weight and
// dense_3.weight with their feature counts.
func writeEmbeddingGemmaGGUF(t testing.TB, path string) {
	t.Helper()
	f, err := gguf.Open(testutil.Path(t, "arch/gemma3/model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const arch = "gemma-embedding"
	var kv []gguf.KV
	for _, e := range f.KVs() {
		switch {
		case e.Key == "general.architecture":
			e.Value = arch
		case strings.HasPrefix(e.Key, "gemma3.rope.scaling."):
			continue
		case e.Key == "gemma3.attention.sliding_window":
			e.Value = uint32(egWindow)
		}
		e.Key = strings.Replace(e.Key, "gemma3.", arch+".", 1)
		kv = append(kv, e)
	}
	kv = append(kv, gguf.KV{Key: arch + ".pooling_type", Value: uint32(1)},
		gguf.KV{Key: arch + ".dense_2_feat_in", Value: uint32(egHidden)},
		gguf.KV{Key: arch + ".dense_2_feat_out", Value: uint32(egDense)},
		gguf.KV{Key: arch + ".dense_3_feat_in", Value: uint32(egDense)},
		gguf.KV{Key: arch + ".dense_3_feat_out", Value: uint32(egHidden)})
	var tensors []gguf.WriteTensor
	for _, ti := range f.Tensors() {
		data, err := f.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, gguf.WriteTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: slices.Clone(data)})
	}
	d2, d3 := embeddingGemmaDense()
	tensors = append(tensors,
		gguf.WriteTensor{Name: "dense_2.weight", DType: tensor.F32, Shape: []int64{egDense, egHidden}, Values: d2},
		gguf.WriteTensor{Name: "dense_3.weight", DType: tensor.F32, Shape: []int64{egHidden, egDense}, Values: d3})
	if err := gguf.WriteFile(path, kv, tensors); err != nil {
		t.Fatal(err)
	}
}

// TestWriteEmbeddingGemmaGGUF writes the fixture where
// AOTLM_EMBEDDINGGEMMA_GGUF says (how testdata/embeddinggemma_llamacpp.json
// was made); without it, it checks the file written to a temporary
// folder: llama.cpp's architecture, pooling and dense tensors.
func TestWriteEmbeddingGemmaGGUF(t *testing.T) {
	path := os.Getenv("AOTLM_EMBEDDINGGEMMA_GGUF")
	if path == "" {
		path = filepath.Join(t.TempDir(), "eg.gguf")
	}
	writeEmbeddingGemmaGGUF(t, path)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if a, _ := f.Value("general.architecture"); a != "gemma-embedding" {
		t.Errorf("architecture %v", a)
	}
	if p, _ := f.Value("gemma-embedding.pooling_type"); p != uint32(1) {
		t.Errorf("pooling_type %v", p)
	}
	for _, n := range []string{"dense_2.weight", "dense_3.weight"} {
		if _, ok := f.TensorType(n); !ok {
			t.Errorf("no tensor %s", n)
		}
	}
}

// readEmbeddingGemmaReference reads testdata/embeddinggemma_llamacpp.json:
// sequences of 6 and 23 ids of the fixture, each pooled mean, cls and
// last, and the vector llama.cpp returns for them (pooled, then the dense
// projections; not normalized). It was made with libllama on the CPU
// from the GGUF TestWriteEmbeddingGemmaGGUF writes: a context with
// embeddings on, pooling_type 1, 2 or 3, n_ctx, n_batch and n_ubatch 64,
// an F32 cache, flash attention off, one thread, the ids in one batch
// (llama_decode, which encodes for a non-causal model), the vector read
// with llama_get_embeddings_seq (what llama-embedding prints before its
// normalization).
func readEmbeddingGemmaReference(t *testing.T) []embedCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "embeddinggemma_llamacpp.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref []embedCase
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatalf("embeddinggemma_llamacpp.json: %v", err)
	}
	if len(ref) != 6 {
		t.Fatalf("%d reference vectors, want 6", len(ref))
	}
	return ref
}

// checkEmbeddingGemma embeds every reference case with m, raw and
// normalized, and checks them within 1e-3 per value, cosine >= 0.9999.
func checkEmbeddingGemma(t *testing.T, m *aotlm.Model, ref []embedCase) {
	t.Helper()
	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	worst, worstCos := 0.0, 1.0
	for _, c := range ref {
		for _, raw := range []bool{true, false} {
			got, err := s.Embed(context.Background(), c.IDs, aotlm.EmbedOptions{Pooling: c.Pooling, Raw: raw})
			if err != nil {
				t.Fatal(err)
			}
			want := c.Embedding
			if !raw {
				want = normalized(want)
			}
			if len(got) != len(want) {
				t.Fatalf("%d values, want %d", len(got), len(want))
			}
			cos, diff := cosine(got, want)
			worst, worstCos = max(worst, diff), min(worstCos, cos)
			if cos < 0.9999 || diff > 1e-3 {
				t.Errorf("%d ids, %s, raw %v: cosine %.6f, largest difference %.2g", len(c.IDs), c.Pooling, raw, cos, diff)
			}
		}
	}
	t.Logf("largest difference %.2g, smallest cosine %.7f", worst, worstCos)
}

// TestEmbeddingGemmaAgainstLlamaCpp: the EmbeddingGemma fixture as a
// gemma-embedding GGUF compiles to an encoder whose pooling is the
// file's (mean) and gives llama.cpp's embeddings of the same file within
// 1e-3 per value (cosine >= 0.9999) for every pooling, over a sequence
// longer than the sliding window and the prefill plan; it refuses to
// generate and a sequence longer than its context.
func TestEmbeddingGemmaAgainstLlamaCpp(t *testing.T) {
	ref := readEmbeddingGemmaReference(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "eg.gguf")
	writeEmbeddingGemmaGGUF(t, src)
	out := filepath.Join(dir, "eg.aot")
	if err := compile.CompileFile(src, out, compile.Options{ARLens: []int{8}, Ctx: 32}); err != nil {
		t.Fatal(err)
	}
	m, err := aotlm.Open(out, aotlm.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Pooling() != aotlm.PoolMean || !m.CanEmbed() {
		t.Fatalf("pooling %q, can embed %v", m.Pooling(), m.CanEmbed())
	}
	checkEmbeddingGemma(t, m, ref)

	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Generate(context.Background(), aotlm.Request{IDs: ref[0].IDs, MaxTokens: 2}, nil); err == nil {
		t.Error("an encoder generated")
	}
	long := make([]int, 33)
	for i := range long {
		long[i] = 5
	}
	if _, err := s.Embed(context.Background(), long, aotlm.EmbedOptions{}); err == nil {
		t.Error("33 ids embedded in a context of 32")
	}
	if _, err := s.Embed(context.Background(), ref[0].IDs, aotlm.EmbedOptions{Raw: true}); err != nil {
		t.Errorf("after a refused request: %v", err)
	}
}

// writeEmbeddingGemmaFolder writes the fixture as a sentence-transformers
// folder of Hugging Face's EmbeddingGemma: a Gemma3TextModel (weights
// without the "model." prefix) with use_bidirectional_attention, and the
// modules Transformer, 1_Pooling (mean), 2_Dense and 3_Dense (no bias,
// identity activation), 4_Normalize. The gemma3 fixture's GGUF holds
// q_norm gains times sqrt(head_dim/query_pre_attn_scalar), so that
// llama.cpp's 1/sqrt(head_dim) scale gives the folder's scores: both
// files are one model.
func writeEmbeddingGemmaFolder(t testing.TB, dir string) {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/gemma3/config.json"), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["architectures"] = []string{"Gemma3TextModel"}
	cfg["use_bidirectional_attention"] = true
	cfg["sliding_window"] = egWindow
	delete(cfg, "rope_scaling")
	ck, err := safetensors.Open(testutil.Path(t, "arch/gemma3/model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var ts []safetensors.Tensor
	for _, ti := range ck.Tensors() {
		v, err := ck.ReadFloat32(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, safetensors.Tensor{Name: strings.TrimPrefix(ti.Name, "model."), DType: tensor.F32, Shape: ti.Shape, Data: v})
	}
	writeJSON := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeJSON("config.json", cfg)
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	writeJSON("modules.json", []map[string]any{
		{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
		{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
		{"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
		{"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"},
		{"idx": 4, "name": "4", "path": "4_Normalize", "type": "sentence_transformers.models.Normalize"},
	})
	writeJSON("1_Pooling/config.json", map[string]any{"word_embedding_dimension": egHidden, "pooling_mode_cls_token": false,
		"pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": false, "pooling_mode_lasttoken": false})
	d2, d3 := embeddingGemmaDense()
	for i, d := range []struct {
		in, out int
		w       []float32
	}{{egHidden, egDense, d2}, {egDense, egHidden, d3}} {
		name := fmt.Sprintf("%d_Dense", i+2)
		writeJSON(name+"/config.json", map[string]any{"in_features": d.in, "out_features": d.out, "bias": false,
			"activation_function": "torch.nn.modules.linear.Identity"})
		if err := safetensors.Write(filepath.Join(dir, name, "model.safetensors"), []safetensors.Tensor{
			{Name: "linear.weight", DType: tensor.F32, Shape: []int64{int64(d.out), int64(d.in)}, Data: d.w}}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEmbeddingGemmaFolder: the same model as a Hugging Face
// sentence-transformers folder compiles to the same encoder: its pooling
// from 1_Pooling, its dense projections from 2_Dense and 3_Dense, and
// llama.cpp's embeddings of the GGUF within 1e-3.
func TestEmbeddingGemmaFolder(t *testing.T) {
	ref := readEmbeddingGemmaReference(t)
	dir := filepath.Join(t.TempDir(), "embeddinggemma")
	writeEmbeddingGemmaFolder(t, dir)
	out := filepath.Join(t.TempDir(), "eg.aot")
	if err := compile.CompileFile(dir, out, compile.Options{ARLens: []int{8}, Ctx: 32}); err != nil {
		t.Fatal(err)
	}
	m, err := aotlm.Open(out, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Pooling() != aotlm.PoolMean {
		t.Fatalf("pooling %q, want mean", m.Pooling())
	}
	checkEmbeddingGemma(t, m, ref)

	// a Dense module without its weights is refused
	if err := os.Remove(filepath.Join(dir, "3_Dense", "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	err = compile.CompileFile(dir, filepath.Join(t.TempDir(), "bad.aot"), compile.Options{Ctx: 32})
	if err == nil || !strings.Contains(err.Error(), "3_Dense") {
		t.Errorf("a Dense module without weights: %v", err)
	}
}
