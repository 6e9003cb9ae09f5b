package serve

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aotlm/aotlm"
)

// specPrompts repeat themselves, so that prompt lookup finds drafts the
// model accepts.
var specPrompts = []string{
	"Tom had a red ball. Tom had a red ball. Tom had",
	"Lily went to the park. She saw a dog. Lily went to the park. She saw",
}

// specCompletion is the part of a completions answer the tests read.
type specCompletion struct {
	Choices []struct {
		Text string `json:"text"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

// TestSpeculativeCompletions: two completions generating at the same
// time with prompt lookup (the speculative object, and llama-server's
// flat speculative.n_max key) give plain greedy decoding's text, report
// the drafted and accepted tokens and the tokens per pass in usage, and
// /metrics counts them and the shared verify passes.
func TestSpeculativeCompletions(t *testing.T) {
	ts := newTestServer(t, Options{Parallel: 2, NoAdapt: true}) // guesses whatever their timing
	const maxTokens = 40
	var want []string
	for _, p := range specPrompts {
		s, err := ts.m.NewSession(0)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Generate(context.Background(), aotlm.Request{Prompt: p, MaxTokens: maxTokens, IgnoreEOS: true}, nil)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res.Text)
	}
	bodies := []map[string]any{
		{"speculative": map[string]any{"type": "lookup", "n_max": 4}},
		{"speculative.n_max": 4}, // the type defaults to lookup
	}
	got := make([]specCompletion, len(specPrompts))
	var wg sync.WaitGroup
	for i, p := range specPrompts {
		body := bodies[i]
		body["prompt"], body["max_tokens"], body["temperature"], body["ignore_eos"] = p, maxTokens, 0, true
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp := postJSON(t, ts, "/v1/completions", body, &got[i]); resp.StatusCode != http.StatusOK {
				t.Errorf("request %d: status %d", i, resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var drafted, accepted int
	for i, g := range got {
		if len(g.Choices) != 1 || g.Choices[0].Text != want[i] {
			t.Errorf("prompt %d: %+v, plain decoding gives %q", i, g.Choices, want[i])
		}
		u := g.Usage
		if u == nil || u.Speculative == nil || u.CompletionDetails == nil {
			t.Fatalf("prompt %d: usage %+v has no speculative report", i, u)
		}
		sp := u.Speculative
		if sp.Type != SpecLookup || sp.AcceptedTokens == 0 || sp.AcceptedTokens > sp.DraftTokens || sp.TokensPerPass <= 1 ||
			sp.Passes >= maxTokens || u.CompletionDetails.Accepted != sp.AcceptedTokens ||
			u.CompletionDetails.Rejected != sp.DraftTokens-sp.AcceptedTokens {
			t.Errorf("prompt %d: speculative usage %+v, details %+v", i, sp, u.CompletionDetails)
		}
		drafted, accepted = drafted+sp.DraftTokens, accepted+sp.AcceptedTokens
	}
	resp, err := http.Get(ts.http.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(b)
	if n := metric(t, text, "aotlm_spec_decode_num_draft_tokens_total"); n != drafted {
		t.Errorf("/metrics: %d drafted tokens, the answers report %d", n, drafted)
	}
	if n := metric(t, text, "aotlm_spec_decode_num_accepted_tokens_total"); n != accepted {
		t.Errorf("/metrics: %d accepted tokens, the answers report %d", n, accepted)
	}
	if metric(t, text, "aotlm_decode_verify_passes_total") == 0 || metric(t, text, "aotlm_spec_decode_tokens_total") != 2*maxTokens-2 {
		t.Errorf("/metrics: no verify passes, or not the tokens the passes chose:\n%s", text)
	}
}

// TestSpeculativeDefault: with the server's default speculation
// (Options.Speculative), a chat completion speculates and gives plain
// decoding's reply; "type": "none" and "n_max": 0 turn it off for a
// request; a request with logprobs decodes plainly under the default
// but is refused when it asks to speculate itself.
func TestSpeculativeDefault(t *testing.T) {
	ts := newTestServer(t, Options{Speculative: SpecLookup, DraftMax: 4})
	user := strings.Repeat("Tom had a red ball. ", 3)
	want := ts.direct(t, user, aotlm.Request{MaxTokens: 30, IgnoreEOS: true})
	chat := func(extra map[string]any) (int, chatResponse) {
		body := map[string]any{"messages": []map[string]any{{"role": "user", "content": user}}, "max_tokens": 30,
			"temperature": 0, "ignore_eos": true}
		for k, v := range extra {
			body[k] = v
		}
		var out chatResponse
		resp := postJSON(t, ts, "/v1/chat/completions", body, &out)
		return resp.StatusCode, out
	}
	code, out := chat(nil)
	if code != http.StatusOK || len(out.Choices) != 1 || out.Choices[0].Message.Content == nil || *out.Choices[0].Message.Content != want.Text {
		t.Fatalf("status %d, %+v; plain decoding gives %q", code, out.Choices, want.Text)
	}
	if out.Usage == nil || out.Usage.Speculative == nil || out.Usage.Speculative.Passes == 0 {
		t.Fatalf("the default did not speculate: usage %+v", out.Usage)
	}
	for _, off := range []map[string]any{{"speculative": map[string]any{"type": "none"}}, {"speculative": map[string]any{"n_max": 0}},
		{"logprobs": true}} {
		code, out := chat(off)
		if code != http.StatusOK || out.Usage == nil || out.Usage.Speculative != nil {
			t.Errorf("%v: status %d, usage %+v: want plain decoding", off, code, out.Usage)
		}
	}
	for _, bad := range []map[string]any{
		{"logprobs": true, "speculative": map[string]any{"type": "lookup"}},
		{"speculative": map[string]any{"type": "draft"}},  // no draft model
		{"speculative": map[string]any{"type": "mtp"}},    // no head
		{"speculative": map[string]any{"type": "guess"}},  // unknown
		{"speculative": map[string]any{"n_max": -1}},      // out of range
		{"speculative.p_min": 2},                          // out of range
		{"speculative": map[string]any{"n_max": "eight"}}, // not a number
	} {
		if code, _ := chat(bad); code != http.StatusBadRequest {
			t.Errorf("%v: status %d, want 400", bad, code)
		}
	}
}

// TestSpeculativeOptions: a server refuses a default speculation it
// cannot run: an unknown type, a draft type without a draft model, the
// model's own head on a model without one, a negative DraftMax.
func TestSpeculativeOptions(t *testing.T) {
	m := openStories(t)
	for _, o := range []Options{{Speculative: "guess"}, {Speculative: SpecDraft}, {Speculative: SpecMTP}, {Speculative: SpecLookup, DraftMax: -1}} {
		if s, err := New(m, o); err == nil {
			s.Close()
			t.Errorf("%+v: no error", o)
		}
	}
	s, err := New(m, Options{Speculative: SpecDraft, Draft: m}) // the model drafts for itself
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// TestSpeculativeDraft: with a draft model (the model itself, which can
// only check the mechanics), a completion that asks for "draft"
// speculation gives plain greedy decoding's text and reports the draft's
// guesses in usage and timings.
func TestSpeculativeDraft(t *testing.T) {
	m := openStories(t)
	ts := newTestServerFor(t, m, Options{Draft: m, NoAdapt: true})
	want := ts.direct(t, "Tom had a red ball", aotlm.Request{MaxTokens: 24, IgnoreEOS: true})
	body := map[string]any{"messages": []map[string]any{{"role": "user", "content": "Tom had a red ball"}}, "max_tokens": 24,
		"temperature": 0, "ignore_eos": true, "speculative.type": "draft", "speculative.n_max": 3}
	var out chatResponse
	if resp := postJSON(t, ts, "/v1/chat/completions", body, &out); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if len(out.Choices) != 1 || out.Choices[0].Message.Content == nil || *out.Choices[0].Message.Content != want.Text {
		t.Fatalf("%+v; plain decoding gives %q", out.Choices, want.Text)
	}
	sp := out.Usage.Speculative
	if sp == nil || sp.Type != SpecDraft || sp.DraftTokens == 0 || sp.AcceptedTokens == 0 || out.Timings == nil ||
		out.Timings.DraftN != sp.DraftTokens || out.Timings.DraftNAccepted != sp.AcceptedTokens {
		t.Errorf("usage %+v, timings %+v: want the draft's guesses reported", sp, out.Timings)
	}
}

// TestSpeculativeOtherAPIs: under the server's default speculation, the
// Ollama (chat, and generate with and without the template), Anthropic
// Messages and Responses endpoints decode speculatively too: each request
// adds passes of a strategy to /metrics.
func TestSpeculativeOtherAPIs(t *testing.T) {
	ts := newTestServer(t, Options{Speculative: SpecLookup})
	text := "Tom had a red ball. Tom had a red ball. Tom had"
	user := []map[string]any{{"role": "user", "content": text}}
	specPasses := func() int {
		resp, err := http.Get(ts.http.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return metric(t, string(b), "aotlm_spec_decode_passes_total")
	}
	opts := map[string]any{"num_predict": 16, "temperature": 0}
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/api/chat", map[string]any{"messages": user, "stream": false, "options": opts}},
		{"/api/generate", map[string]any{"prompt": text, "stream": false, "options": opts}},
		{"/api/generate", map[string]any{"prompt": text, "raw": true, "stream": false, "options": opts}},
		{"/v1/messages", map[string]any{"messages": user, "max_tokens": 16, "temperature": 0}},
		{"/v1/responses", map[string]any{"input": text, "max_output_tokens": 16, "temperature": 0}},
	} {
		before := specPasses()
		if resp := postJSON(t, ts, c.path, c.body, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("%s %v: status %d", c.path, c.body, resp.StatusCode)
			continue
		}
		if after := specPasses(); after <= before {
			t.Errorf("%s %v: no speculative passes (%d before, %d after)", c.path, c.body, before, after)
		}
	}
}
