package serve

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

var (
	embedOnce sync.Once
	embedPath string
	embedErr  error
)

// openStoriesEmbed compiles stories260K once per test binary as an
// embedding model (mean pooling, context 64) and opens it.
func openStoriesEmbed(t testing.TB) *aotlm.Model {
	t.Helper()
	src := testutil.Path(t, storiesGGUF)
	openStories(t) // makes modelDir
	embedOnce.Do(func() {
		embedPath = filepath.Join(modelDir, "stories260K-embed.aot")
		embedErr = compile.CompileFile(src, embedPath, compile.Options{ARLens: []int{8}, Ctx: 64, Pooling: aotlm.PoolMean})
	})
	if embedErr != nil {
		t.Fatalf("compile stories260K with pooling: %v", embedErr)
	}
	if _, err := os.Stat(embedPath); err != nil {
		t.Fatal(err)
	}
	m, err := aotlm.Open(embedPath, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// directEmbed is the oracle: Session.Embed of the text's ids on a fresh
// session.
func directEmbed(t *testing.T, m *aotlm.Model, text string) []float32 {
	t.Helper()
	ids, err := m.Encode(text, false)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, err := s.Embed(context.Background(), ids, aotlm.EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func closeTo(t *testing.T, what string, got []float64, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Abs(got[i]-float64(want[i])) > 1e-6 {
			t.Fatalf("%s: value %d is %g, want %g", what, i, got[i], want[i])
		}
	}
}

// TestEmbeddingsAPI: /v1/embeddings (the OpenAI Go client, floats and
// base64), /api/embed and /api/embeddings answer Session.Embed's vectors
// for each input, in order, with the prompt tokens counted; long inputs,
// bad fields and a generative model get clear errors.
func TestEmbeddingsAPI(t *testing.T) {
	m := openStoriesEmbed(t)
	ts := newTestServerFor(t, m, Options{ModelID: "embed"})
	var models struct {
		Data []struct {
			Meta struct {
				Pooling string `json:"pooling"`
			} `json:"meta"`
		} `json:"data"`
	}
	resp, err := http.Get(ts.http.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if err != nil || len(models.Data) != 1 || models.Data[0].Meta.Pooling != aotlm.PoolMean {
		t.Fatalf("/v1/models: %+v, %v; want pooling mean", models, err)
	}
	texts := []string{"Once upon a time", "The cat sat on the mat.", "Lily liked to play"}
	want := make([][]float32, len(texts))
	tokens := 0
	for i, x := range texts {
		want[i] = directEmbed(t, m, x)
		ids, _ := m.Encode(x, false)
		tokens += len(ids)
	}
	res, err := ts.client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "embed", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != len(texts) || res.Usage.PromptTokens != int64(tokens) {
		t.Fatalf("%d embeddings, %d prompt tokens; want %d and %d", len(res.Data), res.Usage.PromptTokens, len(texts), tokens)
	}
	for i, d := range res.Data {
		if d.Index != int64(i) {
			t.Fatalf("item %d has index %d", i, d.Index)
		}
		closeTo(t, texts[i], d.Embedding, want[i])
	}
	// the texts differ, and so do their vectors
	if cos, _ := cosineOf(want[0], want[1]); cos > 0.9999 {
		t.Fatalf("two texts have the same embedding (cosine %g)", cos)
	}

	var b64 struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	postJSON(t, ts, "/v1/embeddings", map[string]any{"input": texts[1], "encoding_format": "base64"}, &b64)
	if len(b64.Data) != 1 {
		t.Fatalf("base64: %+v", b64)
	}
	raw, err := base64.StdEncoding.DecodeString(b64.Data[0].Embedding)
	if err != nil || len(raw) != 4*len(want[1]) {
		t.Fatalf("base64: %d bytes, %v", len(raw), err)
	}
	for i := range want[1] {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != want[1][i] {
			t.Fatalf("base64 value %d: %g, want %g", i, got, want[1][i])
		}
	}

	// token ids, and fewer dimensions (renormalized)
	ids, _ := m.Encode(texts[2], false)
	var short struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	postJSON(t, ts, "/v1/embeddings", map[string]any{"input": ids, "dimensions": 8}, &short)
	if len(short.Data) != 1 || len(short.Data[0].Embedding) != 8 {
		t.Fatalf("dimensions 8: %+v", short)
	}
	var n float64
	for i, v := range short.Data[0].Embedding {
		n += v * v
		if (v > 0) != (want[2][i] > 0) {
			t.Fatalf("dimension %d has another sign than the whole vector's", i)
		}
	}
	if math.Abs(n-1) > 1e-5 {
		t.Fatalf("a truncated vector of squared norm %g", n)
	}

	var ol struct {
		Model           string      `json:"model"`
		Embeddings      [][]float64 `json:"embeddings"`
		PromptEvalCount int         `json:"prompt_eval_count"`
	}
	postJSON(t, ts, "/api/embed", map[string]any{"model": "embed:latest", "input": texts}, &ol)
	if len(ol.Embeddings) != len(texts) || ol.PromptEvalCount != tokens {
		t.Fatalf("/api/embed: %d embeddings, %d tokens", len(ol.Embeddings), ol.PromptEvalCount)
	}
	for i := range texts {
		closeTo(t, "/api/embed "+texts[i], ol.Embeddings[i], want[i])
	}
	var old struct {
		Embedding []float64 `json:"embedding"`
	}
	postJSON(t, ts, "/api/embeddings", map[string]any{"model": "embed", "prompt": texts[0]}, &old)
	closeTo(t, "/api/embeddings", old.Embedding, want[0])

	// an input longer than the context: refused by OpenAI's route and by
	// /api/embed with truncate false, cut by /api/embed by default
	long := strings.Repeat("Once upon a time there was a cat. ", 40)
	if code, msg, _ := post(t, ts, "/v1/embeddings", `{"input": "`+long+`"}`, nil); code != http.StatusBadRequest || !strings.Contains(msg, "context") {
		t.Fatalf("a long input: %d %s", code, msg)
	}
	resp = postJSON(t, ts, "/api/embed", map[string]any{"input": long, "truncate": false}, nil)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("/api/embed truncate false: status %d", resp.StatusCode)
	}
	postJSON(t, ts, "/api/embed", map[string]any{"input": long}, &ol)
	if len(ol.Embeddings) != 1 || ol.PromptEvalCount != 64 {
		t.Fatalf("/api/embed of a long input: %d embeddings, %d tokens (want 1, 64)", len(ol.Embeddings), ol.PromptEvalCount)
	}
	for _, c := range []struct{ body, msg string }{
		{`{}`, "input is missing"},
		{`{"input": []}`, "empty array"},
		{`{"input": [5, 100000]}`, "outside the vocabulary"},
		{`{"input": {"a": 1}}`, "want a string"},
		{`{"input": "x", "encoding_format": "hex"}`, "encoding_format"},
		{`{"input": "x", "dimensions": -2}`, "dimensions"},
		{`{"input": "x", "model": "other"}`, "does not exist"},
	} {
		if code, msg, _ := post(t, ts, "/v1/embeddings", c.body, nil); code < 400 || code >= 500 || !strings.Contains(msg, c.msg) {
			t.Errorf("%s: %d %q, want a 4xx saying %q", c.body, code, msg, c.msg)
		}
	}

	gen := newTestServer(t, Options{})
	if code, msg, _ := post(t, gen, "/v1/embeddings", `{"input": "x"}`, nil); code != http.StatusBadRequest || !strings.Contains(msg, "not an embedding model") {
		t.Fatalf("a generative model: %d %s", code, msg)
	}
}

func cosineOf(a, b []float32) (float64, error) {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb), nil
}
