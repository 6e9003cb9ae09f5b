package serve

import (
	"context"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

var (
	rankOnce sync.Once
	rankPath string
	rankErr  error
)

// openStoriesRank compiles stories260K once per test binary as a
// reranker (pooling rank, context 512) and opens it.
func openStoriesRank(t testing.TB) *aotlm.Model {
	t.Helper()
	src := testutil.Path(t, storiesGGUF)
	openStories(t) // makes modelDir
	rankOnce.Do(func() {
		rankPath = filepath.Join(modelDir, "stories260K-rank.aot")
		rankErr = compile.CompileFile(src, rankPath, compile.Options{ARLens: []int{8}, Ctx: 512, Pooling: aotlm.PoolRank})
	})
	if rankErr != nil {
		t.Fatalf("compile stories260K as a reranker: %v", rankErr)
	}
	m, err := aotlm.Open(rankPath, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// directScore is the oracle: on a fresh session, the probability of the
// first token of "yes" against that of "no" after the reranker's prompt.
func directScore(t *testing.T, m *aotlm.Model, query, doc string) float64 {
	t.Helper()
	first := func(w string) int {
		ids, err := m.Encode(w, true)
		if err != nil || len(ids) == 0 {
			t.Fatalf("%q: %v %v", w, ids, err)
		}
		return ids[0]
	}
	yes, no := first("yes"), first("no")
	ids, err := m.Encode(rerankPrompt(rerankInstruction, query, doc), true)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var d float64
	if _, err := s.Generate(context.Background(), aotlm.Request{IDs: ids, MaxTokens: 1, IgnoreEOS: true, Logits: func(l []float32, g []int) {
		if len(g) == 0 {
			d = float64(l[yes]) - float64(l[no])
		}
	}}, nil); err != nil {
		t.Fatal(err)
	}
	return 1 / (1 + math.Exp(-d))
}

// TestRerank: /v1/rerank scores each document as the oracle does, sorts
// them best first, cuts to top_n and returns the documents when asked;
// the documents after the first take the prompt's shared head from the
// cache; a model that is no reranker and bad fields are refused.
func TestRerank(t *testing.T) {
	m := openStoriesRank(t)
	ts := newTestServerFor(t, m, Options{ModelID: "rank"})
	query := "Where did the cat sleep?"
	docs := []string{"The cat slept on the warm mat.", "Tom liked to play ball in the park.", "A big dog ran to the sea."}
	want := make([]float64, len(docs))
	for i, d := range docs {
		want[i] = directScore(t, m, query, d)
	}
	var out struct {
		Results []struct {
			Index          int               `json:"index"`
			RelevanceScore float64           `json:"relevance_score"`
			Document       map[string]string `json:"document"`
		} `json:"results"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	resp := postJSON(t, ts, "/v1/rerank", map[string]any{"query": query, "documents": docs, "return_documents": true}, &out)
	if resp.StatusCode != http.StatusOK || len(out.Results) != len(docs) {
		t.Fatalf("status %d, %d results", resp.StatusCode, len(out.Results))
	}
	seen := map[int]bool{}
	for k, r := range out.Results {
		if math.Abs(r.RelevanceScore-want[r.Index]) > 1e-6 {
			t.Errorf("document %d: score %g, want %g", r.Index, r.RelevanceScore, want[r.Index])
		}
		if k > 0 && r.RelevanceScore > out.Results[k-1].RelevanceScore {
			t.Errorf("results not sorted: %g after %g", r.RelevanceScore, out.Results[k-1].RelevanceScore)
		}
		if r.Document["text"] != docs[r.Index] {
			t.Errorf("document %d returned as %q", r.Index, r.Document["text"])
		}
		seen[r.Index] = true
	}
	if len(seen) != len(docs) {
		t.Fatalf("documents %v scored", seen)
	}
	if ts.srv.metrics.reused.Load() == 0 {
		t.Error("no prompt token was taken from the cache: the documents did not share the prompt's head")
	}
	var top struct {
		Results []map[string]any `json:"results"`
	}
	postJSON(t, ts, "/rerank", map[string]any{"query": query, "documents": docs, "top_n": 1}, &top)
	if len(top.Results) != 1 || int(top.Results[0]["index"].(float64)) != out.Results[0].Index || top.Results[0]["document"] != nil {
		t.Fatalf("top_n 1: %+v, want document %d without its text", top.Results, out.Results[0].Index)
	}
	for _, c := range []struct{ body, msg string }{
		{`{"documents": ["a"]}`, "query is missing"},
		{`{"query": "q", "documents": []}`, "documents is missing"},
		{`{"query": "q", "documents": ["a"], "top_n": 0}`, "top_n"},
	} {
		if code, msg, _ := post(t, ts, "/v1/rerank", c.body, nil); code != http.StatusBadRequest || !strings.Contains(msg, c.msg) {
			t.Errorf("%s: %d %q, want 400 saying %q", c.body, code, msg, c.msg)
		}
	}
	gen := newTestServer(t, Options{})
	if code, msg, _ := post(t, gen, "/v1/rerank", `{"query": "q", "documents": ["a"]}`, nil); code != http.StatusBadRequest || !strings.Contains(msg, "not a reranker") {
		t.Fatalf("a generative model: %d %q", code, msg)
	}
}
