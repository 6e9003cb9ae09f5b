package serve

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/aotlm/aotlm"
)

const prompt = "Once upon a time"

func userChat(n int64, extra func(*openai.ChatCompletionNewParams)) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{
		Model:       "stories",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		MaxTokens:   openai.Int(n),
		Temperature: openai.Float(0),
	}
	if extra != nil {
		extra(&p)
	}
	return p
}

// TestChat sends a greedy chat completion with the OpenAI client and
// compares it with generating on a session directly.
func TestChat(t *testing.T) {
	ts := newTestServer(t, Options{})
	want := ts.direct(t, prompt, aotlm.Request{MaxTokens: 24})
	got, err := ts.client.Chat.Completions.New(context.Background(), userChat(24, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 1 {
		t.Fatalf("%d choices", len(got.Choices))
	}
	c := got.Choices[0]
	if c.Message.Content != want.Text || want.Text == "" {
		t.Fatalf("reply %q, direct generation %q", c.Message.Content, want.Text)
	}
	if c.Message.Role != "assistant" || c.FinishReason != "length" {
		t.Fatalf("role %q, finish %q", c.Message.Role, c.FinishReason)
	}
	u := got.Usage
	if u.PromptTokens != int64(len(want.PromptIDs)) || u.CompletionTokens != 24 || u.TotalTokens != u.PromptTokens+24 {
		t.Fatalf("usage %+v, want %d prompt tokens and 24 generated", u, len(want.PromptIDs))
	}
	if got.Model != "stories" || got.Object != "chat.completion" || !strings.HasPrefix(got.ID, "chatcmpl-") {
		t.Fatalf("model %q object %q id %q", got.Model, got.Object, got.ID)
	}
}

// TestChatStreaming streams the same request: the deltas add up to the
// non-streamed reply, the last chunk says why it stopped, and the usage
// chunk comes when asked for.
func TestChatStreaming(t *testing.T) {
	ts := newTestServer(t, Options{})
	want := ts.direct(t, prompt, aotlm.Request{MaxTokens: 24})
	p := userChat(24, func(p *openai.ChatCompletionNewParams) {
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	})
	stream := ts.client.Chat.Completions.NewStreaming(context.Background(), p)
	var text strings.Builder
	var finish string
	var usage openai.CompletionUsage
	chunks := 0
	for stream.Next() {
		ch := stream.Current()
		chunks++
		if ch.Object != "chat.completion.chunk" {
			t.Fatalf("chunk object %q", ch.Object)
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
		if ch.Usage.TotalTokens > 0 {
			usage = ch.Usage
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != want.Text {
		t.Fatalf("streamed %q, direct generation %q", text.String(), want.Text)
	}
	if chunks < 10 {
		t.Fatalf("only %d chunks for 24 tokens: not streamed token by token", chunks)
	}
	if finish != "length" || usage.CompletionTokens != 24 || usage.PromptTokens != int64(len(want.PromptIDs)) {
		t.Fatalf("finish %q, usage %+v", finish, usage)
	}
}

// TestStopString cuts the greedy reply at a word from its middle.
func TestStopString(t *testing.T) {
	ts := newTestServer(t, Options{})
	full := ts.direct(t, prompt, aotlm.Request{MaxTokens: 40}).Text
	words := strings.Fields(full)
	if len(words) < 6 {
		t.Fatalf("reply too short to pick a stop word: %q", full)
	}
	stop := words[len(words)/2]
	cut := strings.Index(full, stop)
	for _, stream := range []bool{false, true} {
		p := userChat(40, func(p *openai.ChatCompletionNewParams) {
			p.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"never in the text", stop}}
		})
		var text, finish string
		if stream {
			s := ts.client.Chat.Completions.NewStreaming(context.Background(), p)
			for s.Next() {
				for _, c := range s.Current().Choices {
					text += c.Delta.Content
					if c.FinishReason != "" {
						finish = c.FinishReason
					}
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
		} else {
			got, err := ts.client.Chat.Completions.New(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			text, finish = got.Choices[0].Message.Content, got.Choices[0].FinishReason
		}
		if text != full[:cut] || finish != "stop" {
			t.Fatalf("stream %v, stop %q: got %q (%s), want %q", stream, stop, text, finish, full[:cut])
		}
	}
}

// TestSeed: sampling with a seed repeats; different seeds differ.
func TestSeed(t *testing.T) {
	ts := newTestServer(t, Options{})
	gen := func(seed int64) string {
		got, err := ts.client.Chat.Completions.New(context.Background(), userChat(32, func(p *openai.ChatCompletionNewParams) {
			p.Temperature = openai.Float(1)
			p.Seed = openai.Int(seed)
		}))
		if err != nil {
			t.Fatal(err)
		}
		return got.Choices[0].Message.Content
	}
	a, b := gen(42), gen(42)
	if a != b {
		t.Fatalf("seed 42 gave %q, then %q", a, b)
	}
	distinct := map[string]bool{a: true}
	for seed := int64(1); seed <= 4; seed++ {
		distinct[gen(seed)] = true
	}
	if len(distinct) < 2 {
		t.Fatalf("five seeds at temperature 1 gave one reply: %q", a)
	}
}

// TestCancelMidStream: a client that cancels frees the only session for
// the next request.
func TestCancelMidStream(t *testing.T) {
	ts := newTestServer(t, Options{Parallel: 1, Queue: -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := ts.client.Chat.Completions.NewStreaming(ctx, userChat(200, func(p *openai.ChatCompletionNewParams) {
		p.Temperature = openai.Float(1)
		p.Seed = openai.Int(7)
	}))
	n := 0
	for s.Next() {
		if n++; n == 3 {
			cancel()
		}
	}
	if err := s.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("stream ended with %v, want the cancellation", err)
	}
	s.Close()
	// the session comes back within a pass; allow a generous margin
	deadline := time.Now().Add(10 * time.Second)
	for ts.srv.pool.busy() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the cancelled request still holds its session after 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := ts.client.Chat.Completions.New(context.Background(), userChat(4, nil)); err != nil {
		t.Fatalf("request after the cancel: %v", err)
	}
	if c := ts.srv.metrics.cancelled.Load(); c != 1 {
		t.Fatalf("%d cancelled generations counted, want 1", c)
	}
}

// TestCompletions drives /v1/completions: greedy text equals direct
// generation from the same prompt.
func TestCompletions(t *testing.T) {
	ts := newTestServer(t, Options{})
	s, err := ts.m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want, err := s.Generate(context.Background(), aotlm.Request{Prompt: prompt, MaxTokens: 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ts.client.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:       "stories",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens:   openai.Int(20),
		Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Text != want.Text || got.Usage.CompletionTokens != 20 {
		t.Fatalf("completion %q (%d tokens), direct %q", got.Choices[0].Text, got.Usage.CompletionTokens, want.Text)
	}
}

// TestPrefixCache: a second turn extending the first reuses its session's
// cache, as usage.prompt_tokens_details.cached_tokens shows.
func TestPrefixCache(t *testing.T) {
	ts := newTestServer(t, Options{Parallel: 2})
	first, err := ts.client.Chat.Completions.New(context.Background(), userChat(8, nil))
	if err != nil {
		t.Fatal(err)
	}
	p := userChat(8, nil)
	p.Messages = append(p.Messages, openai.AssistantMessage(first.Choices[0].Message.Content), openai.UserMessage("Then what?"))
	second, err := ts.client.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	cached := second.Usage.PromptTokensDetails.CachedTokens
	if cached < first.Usage.PromptTokens || cached >= second.Usage.PromptTokens {
		t.Fatalf("second turn: %d of %d prompt tokens cached; the first turn's prompt had %d",
			cached, second.Usage.PromptTokens, first.Usage.PromptTokens)
	}
}
