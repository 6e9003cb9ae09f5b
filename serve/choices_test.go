package serve

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestChoicesN: n choices of a chat completion are the replies of n
// single requests whose seeds follow the request's, in order, streamed
// or not; the prompt is prefilled once (the later choices take it from
// the session's cache) and counted once in usage, the completion tokens
// add up; text completions do the same; n outside [1, 8] is refused.
func TestChoicesN(t *testing.T) {
	ts := newTestServer(t, Options{})
	ctx := context.Background()
	sampled := func(n, seed int64) func(*openai.ChatCompletionNewParams) {
		return func(p *openai.ChatCompletionNewParams) {
			p.Temperature, p.Seed = openai.Float(1), openai.Int(seed)
			if n > 1 {
				p.N = openai.Int(n)
			}
		}
	}
	const n = 3
	var want []string
	for i := range int64(n) {
		r, err := ts.client.Chat.Completions.New(ctx, userChat(12, sampled(1, 40+i)))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, r.Choices[0].Message.Content)
	}
	if want[0] == want[1] && want[1] == want[2] {
		t.Fatalf("three seeds gave one reply %q: the test cannot tell choices apart", want[0])
	}

	fresh := newTestServer(t, Options{})
	r, err := fresh.client.Chat.Completions.New(ctx, userChat(12, sampled(n, 40)))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Choices) != n {
		t.Fatalf("%d choices, want %d", len(r.Choices), n)
	}
	for i, c := range r.Choices {
		if c.Index != int64(i) || c.Message.Content != want[i] {
			t.Errorf("choice %d (index %d): %q, want %q", i, c.Index, c.Message.Content, want[i])
		}
	}
	prompt := int(r.Usage.PromptTokens)
	m := &fresh.srv.metrics
	if got := m.prompt.Load(); got != int64(n*prompt) {
		t.Fatalf("the choices' prompts hold %d tokens, want %d x %d", got, n, prompt)
	}
	// a fresh server: the first choice prefills the whole prompt, the
	// others take all of it but the last token from the cache
	if got := m.reused.Load(); got < int64((n-1)*(prompt-1)) {
		t.Fatalf("%d prompt tokens reused, want at least %d: the choices did not share the prefill", got, (n-1)*(prompt-1))
	}
	if r.Usage.CompletionTokens != m.generated.Load() || r.Usage.TotalTokens != r.Usage.PromptTokens+r.Usage.CompletionTokens {
		t.Fatalf("usage %+v, %d tokens generated", r.Usage, m.generated.Load())
	}

	// streamed: each choice's deltas carry its index
	stream := ts.client.Chat.Completions.NewStreaming(ctx, userChat(12, sampled(n, 40)))
	texts := make([]strings.Builder, n)
	finished := 0
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			if c.Index < 0 || c.Index >= n {
				t.Fatalf("a chunk of choice %d", c.Index)
			}
			texts[c.Index].WriteString(c.Delta.Content)
			if c.FinishReason != "" {
				finished++
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if texts[i].String() != want[i] {
			t.Errorf("streamed choice %d: %q, want %q", i, texts[i].String(), want[i])
		}
	}
	if finished != n {
		t.Errorf("%d finish reasons, want %d", finished, n)
	}

	// text completions
	one := func(seed int64) string {
		c, err := ts.client.Completions.New(ctx, openai.CompletionNewParams{Model: "stories",
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
			MaxTokens: openai.Int(10), Temperature: openai.Float(1), Seed: openai.Int(seed)})
		if err != nil {
			t.Fatal(err)
		}
		return c.Choices[0].Text
	}
	c, err := ts.client.Completions.New(ctx, openai.CompletionNewParams{Model: "stories",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(10), Temperature: openai.Float(1), Seed: openai.Int(7), N: openai.Int(2)})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Choices) != 2 || c.Choices[0].Text != one(7) || c.Choices[1].Text != one(8) || c.Choices[1].Index != 1 {
		t.Fatalf("completions n 2: %+v", c.Choices)
	}

	for _, body := range []string{`{"prompt": "a", "n": 0}`, `{"prompt": "a", "n": 9}`} {
		if code, msg, _ := post(t, ts, "/v1/completions", body, nil); code != http.StatusBadRequest || !strings.Contains(msg, "want 1 to 8") {
			t.Errorf("%s: %d %q", body, code, msg)
		}
	}
}
