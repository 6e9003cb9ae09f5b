package aotlm_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

// embedCase is one reference embedding: token ids, a pooling and the
// pooled vector as llama.cpp returns it (not normalized).
type embedCase struct {
	IDs       []int     `json:"ids"`
	Pooling   string    `json:"pooling"`
	Embedding []float32 `json:"embedding"`
}

// readEmbedReference reads testdata/embeddings_llamacpp.json: for the
// qwen3 and gemma3 fixtures of arch/ (their model.gguf, F32), two random
// id sequences of 5 and 21 tokens, each pooled mean, cls and last. It
// was made with llama.cpp's libllama on the CPU: a context with
// embeddings on, pooling_type 1, 2 or 3, an F32 KV cache and flash
// attention off (its CPU path rounds q to binary16), the ids decoded in
// one batch, the vector read with llama_get_embeddings_seq (what
// llama-embedding prints before its normalization).
func readEmbedReference(t *testing.T) map[string][]embedCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "embeddings_llamacpp.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string][]embedCase
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatalf("embeddings_llamacpp.json: %v", err)
	}
	return ref
}

// cosine returns the cosine similarity of a and b and their largest
// absolute difference.
func cosine(a, b []float32) (cos, diff float64) {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
		diff = max(diff, math.Abs(float64(a[i])-float64(b[i])))
	}
	return ab / math.Sqrt(aa*bb), diff
}

// TestEmbedAgainstLlamaCpp: the qwen3 and gemma3 fixtures compiled with a
// pooling give llama.cpp's embeddings of the same GGUF within 1e-3 per
// value (cosine >= 0.9999), raw and normalized, for every pooling, over
// sequences longer than the prefill plan (several passes).
func TestEmbedAgainstLlamaCpp(t *testing.T) {
	ref := readEmbedReference(t)
	for _, fam := range []string{"qwen3", "gemma3"} {
		t.Run(fam, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), fam+".aot")
			if err := compile.CompileFile(testutil.Path(t, "arch/"+fam+"/model.gguf"), out,
				compile.Options{ARLens: []int{8}, Ctx: 64, Pooling: aotlm.PoolLast}); err != nil {
				t.Fatal(err)
			}
			m, err := aotlm.Open(out, aotlm.Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.Pooling() != aotlm.PoolLast || !m.CanEmbed() {
				t.Fatalf("pooling %q, can embed %v", m.Pooling(), m.CanEmbed())
			}
			s, err := m.NewSession(0)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if len(ref[fam]) == 0 {
				t.Fatal("no reference")
			}
			worst, worstCos := 0.0, 1.0
			for _, c := range ref[fam] {
				for _, raw := range []bool{true, false} {
					got, err := s.Embed(context.Background(), c.IDs, aotlm.EmbedOptions{Pooling: c.Pooling, Raw: raw})
					if err != nil {
						t.Fatal(err)
					}
					want := c.Embedding
					if !raw {
						want = normalized(want)
						var n float64
						for _, v := range got {
							n += float64(v) * float64(v)
						}
						if math.Abs(n-1) > 1e-5 {
							t.Errorf("normalized vector of squared norm %g", n)
						}
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
			// the model's pooling is the default
			c := ref[fam][0]
			for _, r := range ref[fam] {
				if r.Pooling == aotlm.PoolLast {
					c = r
				}
			}
			got, err := s.Embed(context.Background(), c.IDs, aotlm.EmbedOptions{Raw: true})
			if err != nil {
				t.Fatal(err)
			}
			if cos, _ := cosine(got, c.Embedding); cos < 0.9999 {
				t.Errorf("default pooling: cosine %.6f with last's", cos)
			}
			if _, err := s.Embed(context.Background(), c.IDs, aotlm.EmbedOptions{Pooling: "max"}); err == nil {
				t.Error("pooling max accepted")
			}
			if _, err := s.Embed(context.Background(), nil, aotlm.EmbedOptions{}); err == nil {
				t.Error("no ids accepted")
			}
		})
	}
}

// TestEmbedNeedsHiddenRows: a generative artifact refuses Embed.
func TestEmbedNeedsHiddenRows(t *testing.T) {
	out := filepath.Join(t.TempDir(), "qwen3.aot")
	if err := compile.CompileFile(testutil.Path(t, "arch/qwen3/model.gguf"), out, compile.Options{Ctx: 32}); err != nil {
		t.Fatal(err)
	}
	m, err := aotlm.Open(out, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.CanEmbed() || m.Pooling() != "" {
		t.Fatalf("a generative model: can embed %v, pooling %q", m.CanEmbed(), m.Pooling())
	}
	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Embed(context.Background(), []int{5, 6}, aotlm.EmbedOptions{Pooling: aotlm.PoolMean}); !errors.Is(err, aotlm.ErrNoEmbeddings) {
		t.Fatalf("got %v, want ErrNoEmbeddings", err)
	}
}

func normalized(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / math.Sqrt(n))
	}
	return out
}
