package serve

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/modelparts"
	"github.com/aotlm/aotlm/internal/testutil"
)

// addRandomAdapter loads a random rank-4 adapter on every projection of
// stories260K into m under name.
func addRandomAdapter(t *testing.T, m *aotlm.Model, name string, seed uint64) {
	t.Helper()
	ck, err := detect.Open(testutil.Path(t, storiesGGUF))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	src, err := arch.Open(ck)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 5))
	var ls []engine.AdapterLinear
	for _, w := range src.Names() {
		sh := src.Shapes[w]
		if !strings.HasSuffix(w, "_proj.weight") || len(sh) != 2 {
			continue
		}
		l := engine.AdapterLinear{Weight: w, Rank: 4, In: sh[1], Out: sh[0], Scale: 1,
			A: make([]float32, 4*sh[1]), B: make([]float32, sh[0]*4)}
		for i := range l.A {
			l.A[i] = float32(rng.NormFloat64() * 0.3)
		}
		for i := range l.B {
			l.B[i] = float32(rng.NormFloat64() * 0.3)
		}
		ls = append(ls, l)
	}
	a, err := engine.NewAdapter(name, ls, engine.AdapterF32)
	if err == nil {
		err = modelparts.Engine(m).AddAdapter(a)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestServeAdapters: two requests with different adapters (one by the
// "adapter" field, one by "model:adapter") generate at once, each the
// reply its adapter gives on a session of its own, and share decode
// passes; the adapters are listed, and an unknown one is refused.
func TestServeAdapters(t *testing.T) {
	m := openStories(t)
	addRandomAdapter(t, m, "a", 1)
	addRandomAdapter(t, m, "b", 2)
	ts := newTestServerFor(t, m, Options{Parallel: 2})
	want := map[string]string{}
	for _, name := range []string{"", "a", "b"} {
		text, err := m.RenderChat([]aotlm.Message{{Role: "user", Content: "Tell a story"}}, aotlm.RenderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids, err := m.Encode(text, true)
		if err != nil {
			t.Fatal(err)
		}
		s, err := m.NewSession(0)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetAdapter(name, 1); err != nil {
			t.Fatal(err)
		}
		res, err := s.Generate(context.Background(), aotlm.Request{IDs: ids, MaxTokens: 40, IgnoreEOS: true, StopIDs: m.EndOfTurnIDs()}, nil)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		want[name] = res.Text
	}
	if want["a"] == want[""] || want["a"] == want["b"] {
		t.Fatalf("the adapters do not change the reply: %q", want)
	}
	bodies := map[string]map[string]any{
		"a": {"model": "stories", "adapter": "a"},
		"b": {"model": "stories:b"},
	}
	shared := false
	for try := 0; try < 5 && !shared; try++ {
		before := m.DecodeStats()
		var wg sync.WaitGroup
		for name, body := range bodies {
			body["messages"] = []map[string]string{{"role": "user", "content": "Tell a story"}}
			body["max_tokens"], body["temperature"], body["ignore_eos"] = 40, 0, true
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out chatResponse
				if resp := postJSON(t, ts, "/v1/chat/completions", body, &out); resp.StatusCode != 200 || len(out.Choices) != 1 {
					t.Errorf("adapter %s: status %d, %+v", name, resp.StatusCode, out)
					return
				}
				if got := out.Choices[0].Message.Content; got == nil || *got != want[name] {
					t.Errorf("adapter %s: reply %v, want %q", name, got, want[name])
				}
			}()
		}
		wg.Wait()
		after := m.DecodeStats()
		shared = after.Rows-before.Rows > after.Passes-before.Passes
	}
	if !shared {
		t.Error("the requests with different adapters never shared a decode pass")
	}
	var list struct {
		Data []adapterEntry `json:"data"`
	}
	resp, err := http.Get(ts.http.URL + "/v1/adapters")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list.Data) != 2 || list.Data[1].ModelID != "stories:b" {
		t.Errorf("GET /v1/adapters: %v, %+v", err, list)
	}
	for _, body := range []string{`{"model": "stories:c", "messages": [{"role": "user", "content": "x"}]}`,
		`{"adapter": "c", "messages": [{"role": "user", "content": "x"}]}`} {
		if code, msg, _ := post(t, ts, "/v1/chat/completions", body, nil); code != 404 || !strings.Contains(msg, `"c"`) {
			t.Errorf("%s: %d %s", body, code, msg)
		}
	}
	if code, _, _ := post(t, ts, "/v1/adapters", `{"name": "c", "path": "x"}`, nil); code != 403 {
		t.Errorf("POST /v1/adapters without LoadAdapter: %d, want 403", code)
	}
}

// TestServeAdapterLoading: with Options.LoadAdapter, POST /v1/adapters
// loads through it and DELETE /v1/adapters/{name} unloads.
func TestServeAdapterLoading(t *testing.T) {
	m := openStories(t)
	var loaded []string
	ts := newTestServerFor(t, m, Options{LoadAdapter: func(m *aotlm.Model, name, path string, scale float64) error {
		loaded = append(loaded, name+"="+path)
		addRandomAdapter(t, m, name, 3)
		return nil
	}})
	if code, msg, _ := post(t, ts, "/v1/adapters", `{"name": "c", "path": "some/dir", "scale": 0.5}`, nil); code != 200 || len(loaded) != 1 || loaded[0] != "c=some/dir" {
		t.Fatalf("POST /v1/adapters: %d %s, loaded %v", code, msg, loaded)
	}
	if code, msg, _ := post(t, ts, "/v1/adapters", `{"name": "x:y", "path": "p"}`, nil); code != 400 {
		t.Errorf("a name with a colon: %d %s", code, msg)
	}
	req, _ := http.NewRequest(http.MethodDelete, ts.http.URL+"/v1/adapters/c", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(m.Adapters()) != 0 {
		t.Errorf("DELETE: %d, adapters %v", resp.StatusCode, m.Adapters())
	}
}

// TestServeAdapterOtherAPIs: the Responses and Ollama APIs take the
// adapter from the model id too (Ollama's tag names it): their replies
// are the adapter's.
func TestServeAdapterOtherAPIs(t *testing.T) {
	m := openStories(t)
	addRandomAdapter(t, m, "a", 1)
	ts := newTestServerFor(t, m, Options{})
	var plain, adapted struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	}
	for _, c := range []struct {
		model string
		out   any
	}{{"stories", &plain}, {"stories:a", &adapted}} {
		body := map[string]any{"model": c.model, "stream": false, "messages": []map[string]string{{"role": "user", "content": "Tell a story"}},
			"options": map[string]any{"temperature": 0, "num_predict": 24}}
		if resp := postJSON(t, ts, "/api/chat", body, c.out); resp.StatusCode != 200 {
			t.Fatalf("/api/chat %s: status %d", c.model, resp.StatusCode)
		}
	}
	if plain.Message.Content == adapted.Message.Content {
		t.Errorf("Ollama's stories:a replies as the base model does: %q", plain.Message.Content)
	}
	var resp struct {
		Output []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if r := postJSON(t, ts, "/v1/responses", map[string]any{"model": "stories:a", "input": "Tell a story", "temperature": 0, "max_output_tokens": 24}, &resp); r.StatusCode != 200 {
		t.Fatalf("/v1/responses: status %d", r.StatusCode)
	}
	if len(resp.Output) == 0 || len(resp.Output[0].Content) == 0 || resp.Output[0].Content[0].Text != adapted.Message.Content {
		t.Errorf("Responses with stories:a: %+v, want the Ollama reply %q", resp, adapted.Message.Content)
	}
}
