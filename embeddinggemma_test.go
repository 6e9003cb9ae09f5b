package aotlm_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/recipe"
	"github.com/aotlm/aotlm/internal/testutil/embedgemma"
)

// TestWriteEmbeddingGemmaGGUF writes the fixture where
// AOTLM_EMBEDDINGGEMMA_GGUF says (how testdata/embeddinggemma_llamacpp.json
// was made); without it, it checks the file written to a temporary
// folder: llama.cpp's architecture, pooling and dense tensors.
func TestWriteEmbeddingGemmaGGUF(t *testing.T) {
	path := os.Getenv("AOTLM_EMBEDDINGGEMMA_GGUF")
	if path == "" {
		path = filepath.Join(t.TempDir(), "eg.gguf")
	}
	embedgemma.WriteGGUF(t, path)
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
	embedgemma.WriteGGUF(t, src)
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
	if _, err := s.Generate(context.Background(), aotlm.Request{IDs: ref[0].IDs, MaxTokens: 2}, nil); !errors.Is(err, aotlm.ErrEmbeddingsOnly) {
		t.Errorf("an encoder generated: %v", err)
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

// TestEmbeddingGemmaFolder: the same model as a Hugging Face
// sentence-transformers folder compiles to the same encoder: its pooling
// from 1_Pooling, its dense projections from 2_Dense and 3_Dense, and
// llama.cpp's embeddings of the GGUF within 1e-3.
func TestEmbeddingGemmaFolder(t *testing.T) {
	ref := readEmbeddingGemmaReference(t)
	dir := filepath.Join(t.TempDir(), "embeddinggemma")
	embedgemma.WriteFolder(t, dir)
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

// TestEmbeddingGemmaQuantized: the fixture quantized with the w8a16
// preset (its dense projections W8 as well) compiles to an encoder whose
// normalized embeddings stay within cosine 0.999 of llama.cpp's F32 ones
// (8-bit weights leave them within 2e-4 of it here).
func TestEmbeddingGemmaQuantized(t *testing.T) {
	ref := readEmbeddingGemmaReference(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "eg.gguf")
	embedgemma.WriteGGUF(t, src)
	r, err := quant.Preset("w8a16")
	if err != nil {
		t.Fatal(err)
	}
	q := filepath.Join(dir, "q")
	rep, err := recipe.Quantize(src, q, recipe.QuantizeOptions{Recipe: r})
	if err != nil {
		t.Fatal(err)
	}
	dense := 0
	for _, tr := range rep.Tensors {
		if strings.HasSuffix(tr.Name, "_Dense.linear.weight") && tr.Scheme == "w8" {
			dense++
		}
	}
	if dense != 2 {
		t.Errorf("%d dense projections quantized W8, want 2", dense)
	}
	out := filepath.Join(dir, "q.aot")
	if err := compile.CompileFile(q, out, compile.Options{ARLens: []int{8}, Ctx: 32}); err != nil {
		t.Fatal(err)
	}
	m, err := aotlm.Open(out, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	worst := 1.0
	for _, c := range ref {
		got, err := s.Embed(context.Background(), c.IDs, aotlm.EmbedOptions{Pooling: c.Pooling})
		if err != nil {
			t.Fatal(err)
		}
		cos, _ := cosine(got, normalized(c.Embedding))
		worst = min(worst, cos)
	}
	t.Logf("smallest cosine %.6f", worst)
	if worst < 0.999 {
		t.Errorf("smallest cosine %.6f with llama.cpp's F32 embeddings", worst)
	}
}
