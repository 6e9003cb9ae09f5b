package serve

import (
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil/embedgemma"
)

// TestEmbeddingsEmbeddingGemma: the server on the EmbeddingGemma
// fixture (a bidirectional encoder with dense projections, from its
// gemma-embedding GGUF) answers /v1/embeddings and /api/embed with
// llama.cpp's mean-pooled vectors of the root package's reference
// (testdata/embeddinggemma_llamacpp.json), normalized, within 1e-3 per
// value; a completion on it is refused with the reason.
func TestEmbeddingsEmbeddingGemma(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "testdata", "embeddinggemma_llamacpp.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref []struct {
		IDs       []int     `json:"ids"`
		Pooling   string    `json:"pooling"`
		Embedding []float32 `json:"embedding"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "eg.gguf")
	embedgemma.WriteGGUF(t, src)
	out := filepath.Join(dir, "eg.aot")
	if err := compile.CompileFile(src, out, compile.Options{ARLens: []int{8}, Ctx: 32}); err != nil {
		t.Fatal(err)
	}
	m, err := aotlm.Open(out, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ts := newTestServerFor(t, m, Options{ModelID: "embeddinggemma"})
	var inputs [][]int
	var want [][]float32
	for _, c := range ref {
		if c.Pooling == aotlm.PoolMean {
			inputs = append(inputs, c.IDs)
			want = append(want, c.Embedding)
		}
	}
	if len(inputs) != 2 {
		t.Fatalf("%d mean-pooled references, want 2", len(inputs))
	}
	check := func(route string, got [][]float64) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d embeddings, want %d", route, len(got), len(want))
		}
		for i := range want {
			var n float64
			for _, v := range want[i] {
				n += float64(v) * float64(v)
			}
			if len(got[i]) != len(want[i]) {
				t.Fatalf("%s: %d values, want %d", route, len(got[i]), len(want[i]))
			}
			for j, v := range want[i] {
				if d := math.Abs(got[i][j] - float64(v)/math.Sqrt(n)); d > 1e-3 {
					t.Fatalf("%s: input %d value %d differs from llama.cpp's by %.2g", route, i, j, d)
				}
			}
		}
	}
	var oa struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	postJSON(t, ts, "/v1/embeddings", map[string]any{"input": inputs}, &oa)
	var got [][]float64
	for _, d := range oa.Data {
		got = append(got, d.Embedding)
	}
	check("/v1/embeddings", got)
	if oa.Usage.PromptTokens != len(inputs[0])+len(inputs[1]) {
		t.Errorf("/v1/embeddings: %d prompt tokens", oa.Usage.PromptTokens)
	}
	var ol struct {
		Embeddings [][]float64 `json:"embeddings"`
	}
	postJSON(t, ts, "/api/embed", map[string]any{"input": inputs}, &ol)
	check("/api/embed", ol.Embeddings)

	code, msg, _ := post(t, ts, "/v1/completions", `{"prompt": [5, 6, 7], "max_tokens": 2}`, nil)
	if code != http.StatusBadRequest || !strings.Contains(msg, "encoder") {
		t.Errorf("a completion on an encoder: %d %s", code, msg)
	}
}
