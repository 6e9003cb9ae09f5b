package serve

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/aotlm/aotlm"
)

// TestLogitBias: in greedy decoding, a bias of -100 bans the token the
// model would choose, and +100 on another token makes it the choice, in
// text and chat completions; bad maps are refused.
func TestLogitBias(t *testing.T) {
	ts := newTestServer(t, Options{})
	ids, err := ts.m.Encode("Once upon a time", false)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ts.m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Generate(context.Background(), aotlm.Request{IDs: ids, MaxTokens: 1, IgnoreEOS: true}, nil)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	best := res.IDs[0]
	tok := ts.m.Tokenizer()
	other := best + 1
	for strings.TrimSpace(tok.Decode([]int{other})) == "" || tok.Decode([]int{other}) == tok.Decode([]int{best}) {
		other++
	}
	complete := func(bias map[string]int64) string {
		t.Helper()
		ids64 := make([]int64, len(ids))
		for i, id := range ids {
			ids64[i] = int64(id)
		}
		r, err := ts.client.Completions.New(context.Background(), openai.CompletionNewParams{
			Model: "stories", Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: ids64},
			MaxTokens: openai.Int(1), Temperature: openai.Float(0), LogitBias: bias})
		if err != nil {
			t.Fatal(err)
		}
		return r.Choices[0].Text
	}
	if got := complete(nil); got != tok.Decode([]int{best}) {
		t.Fatalf("unbiased: %q, want %q", got, tok.Decode([]int{best}))
	}
	if got := complete(map[string]int64{strconv.Itoa(best): -100}); got == tok.Decode([]int{best}) {
		t.Fatalf("the banned token %d (%q) was chosen", best, got)
	}
	if got := complete(map[string]int64{strconv.Itoa(other): 100}); got != tok.Decode([]int{other}) {
		t.Fatalf("a bias of 100 on %d (%q): got %q", other, tok.Decode([]int{other}), got)
	}

	// chat: every token but the favoured one is pushed far down
	r, err := ts.client.Chat.Completions.New(context.Background(), userChat(3, func(p *openai.ChatCompletionNewParams) {
		p.LogitBias = map[string]int64{strconv.Itoa(other): 100}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat(tok.Decode([]int{other}), 3); r.Choices[0].Message.Content != want {
		t.Fatalf("chat with a bias of 100 on %d: %q, want %q", other, r.Choices[0].Message.Content, want)
	}

	for _, c := range []struct{ body, msg string }{
		{`{"prompt": "a", "logit_bias": {"x": 1}}`, "not a token id"},
		{`{"prompt": "a", "logit_bias": {"100000": 1}}`, "not a token id"},
		{`{"prompt": "a", "logit_bias": {"5": 101}}`, "[-100, 100]"},
		{`{"prompt": "a", "logit_bias": [1]}`, "want an object"},
	} {
		if code, msg, _ := post(t, ts, "/v1/completions", c.body, nil); code != http.StatusBadRequest || !strings.Contains(msg, c.msg) {
			t.Errorf("%s: %d %q, want 400 saying %q", c.body, code, msg, c.msg)
		}
	}
}
