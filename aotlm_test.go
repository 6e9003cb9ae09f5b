package aotlm_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

// storiesArtifact compiles the real stories260K model (AR-1 and AR-16
// plans, 256 positions) once per test binary.
var storiesPath string

func stories(t testing.TB, mode string) *aotlm.Model {
	t.Helper()
	if storiesPath == "" {
		out := filepath.Join(t.TempDir(), "stories.aot")
		src := testutil.Path(t, "models/stories260K/stories260K.gguf")
		if err := compile.CompileFile(src, out, compile.Options{ARLens: []int{16}, Ctx: 256}); err != nil {
			t.Fatal(err)
		}
		storiesPath = out
		t.Cleanup(func() { storiesPath = "" })
	}
	m, err := aotlm.Open(storiesPath, aotlm.Options{Threads: 2, Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestGenerateMatchesLlama2C: the runtime's greedy output on the compiled
// stories260K equals llama2.c's reference ids for its five prompts.
func TestGenerateMatchesLlama2C(t *testing.T) {
	ref := testutil.StoriesGreedy(t)
	m := stories(t, "hybrid")
	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range ref.Cases {
		res, err := s.Generate(context.Background(), aotlm.Request{Prompt: c.Prompt, MaxTokens: len(c.IDs)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.PromptIDs, c.PromptIDs) || !slices.Equal(res.IDs, c.IDs) {
			t.Errorf("%q: prompt %v ids %v, llama2.c %v %v", c.Prompt, res.PromptIDs, res.IDs, c.PromptIDs, c.IDs)
		}
	}
}

// TestReuseGivesSameIDs: a session that already holds a prefix of the
// prompt prefills only the rest and gives the ids of a fresh session.
func TestReuseGivesSameIDs(t *testing.T) {
	for _, mode := range []string{"hybrid", "kv"} {
		m := stories(t, mode)
		s, _ := m.NewSession(0)
		first, err := s.Generate(context.Background(), aotlm.Request{Prompt: "Once upon a time", MaxTokens: 30}, nil)
		if err != nil {
			t.Fatal(err)
		}
		next := append(append(slices.Clone(first.PromptIDs), first.IDs...), m.Tokenizer().Encode(" Then Tom said", tokOpts)...)
		got, err := s.Generate(context.Background(), aotlm.Request{IDs: next, MaxTokens: 30}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Reused < len(first.PromptIDs)+len(first.IDs)-1 {
			t.Errorf("%s: reused %d of %d prompt tokens", mode, got.Reused, len(next))
		}
		fresh, _ := m.NewSession(0)
		want, err := fresh.Generate(context.Background(), aotlm.Request{IDs: next, MaxTokens: 30}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want.Reused != 0 || !slices.Equal(got.IDs, want.IDs) {
			t.Errorf("%s: with reuse %v, fresh %v (reused %d)", mode, got.IDs, want.IDs, want.Reused)
		}
		// the same prompt again: everything but its last token is reused
		again, err := s.Generate(context.Background(), aotlm.Request{IDs: next, MaxTokens: 30}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if again.Reused != len(next)-1 || !slices.Equal(again.IDs, want.IDs) {
			t.Errorf("%s: same prompt again: reused %d, ids %v", mode, again.Reused, again.IDs)
		}
	}
}

// TestStopStrings: generation ends where a stop string appears; the text
// stops before it, and what streamed equals the text.
func TestStopStrings(t *testing.T) {
	m := stories(t, "hybrid")
	s, _ := m.NewSession(0)
	full, err := s.Generate(context.Background(), aotlm.Request{Prompt: "Once upon a time", MaxTokens: 60}, nil)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(full.Text, "Lily")
	if i < 0 {
		t.Fatalf("no Lily in %q", full.Text)
	}
	var streamed strings.Builder
	res, err := s.Generate(context.Background(), aotlm.Request{Prompt: "Once upon a time", MaxTokens: 60, Stop: []string{"Lily"}},
		func(tk aotlm.Token) error { streamed.WriteString(tk.Text); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != aotlm.StopString || res.Text != full.Text[:i] || streamed.String() != res.Text {
		t.Errorf("stop %q: reason %s, text %q, streamed %q; want %q", "Lily", res.StopReason, res.Text, streamed.String(), full.Text[:i])
	}
	// streaming without stops hands out the whole text
	streamed.Reset()
	res, _ = s.Generate(context.Background(), aotlm.Request{Prompt: "Once upon a time", MaxTokens: 60},
		func(tk aotlm.Token) error { streamed.WriteString(tk.Text); return nil })
	if streamed.String() != res.Text || res.Text != full.Text {
		t.Errorf("streamed %q, text %q, want %q", streamed.String(), res.Text, full.Text)
	}
}

// TestCancel: a done context ends generation between passes with its
// error, and the session stays usable.
func TestCancel(t *testing.T) {
	m := stories(t, "hybrid")
	s, _ := m.NewSession(0)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	res, err := s.Generate(ctx, aotlm.Request{Prompt: "Once upon a time", MaxTokens: 100}, func(aotlm.Token) error {
		if n++; n == 5 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || res.StopReason != aotlm.StopCanceled || len(res.IDs) != 5 {
		t.Fatalf("cancel after 5 tokens: %v, reason %s, %d ids", err, res.StopReason, len(res.IDs))
	}
	if _, err := s.Generate(context.Background(), aotlm.Request{Prompt: "Once upon a time", MaxTokens: 5}, nil); err != nil {
		t.Fatalf("after a cancel: %v", err)
	}
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := s.Generate(done, aotlm.Request{Prompt: "One day", MaxTokens: 5}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a done context: %v", err)
	}
}

// chatTemplate is a plain template of our own: stories260K has none.
const chatTemplate = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"

// TestChatTurnsEqualFreshRuns: each turn of a chat that reuses its cache
// gives the ids of a fresh session generating from the whole rendered
// conversation, and reuses all of the previous turns.
func TestChatTurnsEqualFreshRuns(t *testing.T) {
	for _, mode := range []string{"hybrid", "kv"} {
		m := stories(t, mode)
		if err := m.SetChatTemplate("test", chatTemplate); err != nil {
			t.Fatal(err)
		}
		c, err := m.NewChat(aotlm.ChatOptions{System: "Tell a story."})
		if err != nil {
			t.Fatal(err)
		}
		req := aotlm.Request{MaxTokens: 20, Sampling: aotlm.Sampling{}}
		for k, user := range []string{"Once upon a time", "Lily saw a cat", "The cat ran", "They were happy"} {
			res, err := c.Send(context.Background(), user, req, nil)
			if err != nil {
				t.Fatal(err)
			}
			// the conversation as the reference renders it
			msgs := append([]aotlm.Message{{Role: "system", Content: "Tell a story."}}, c.Messages()...)
			text, err := m.RenderChat(msgs[:len(msgs)-1], aotlm.RenderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			fresh, _ := m.NewSession(0)
			want, err := fresh.Generate(context.Background(), aotlm.Request{Prompt: text, Raw: true, MaxTokens: 20}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.PromptIDs, want.PromptIDs) || !slices.Equal(res.IDs, want.IDs) {
				t.Fatalf("%s turn %d: chat ids %v, fresh %v", mode, k+1, res.IDs, want.IDs)
			}
			if k > 0 && res.Reused < len(res.PromptIDs)/2 {
				t.Errorf("%s turn %d: reused %d of %d prompt tokens", mode, k+1, res.Reused, len(res.PromptIDs))
			}
		}
	}
}

// TestChatDropsOldTurns: a conversation longer than the context keeps
// the system prompt, leaves out the oldest turns and says how many.
func TestChatDropsOldTurns(t *testing.T) {
	m := stories(t, "hybrid")
	if err := m.SetChatTemplate("test", chatTemplate); err != nil {
		t.Fatal(err)
	}
	c, err := m.NewChat(aotlm.ChatOptions{System: "Be kind.", Context: 96, Reserve: 16})
	if err != nil {
		t.Fatal(err)
	}
	dropped := 0
	for k := range 8 {
		res, err := c.Send(context.Background(), fmt.Sprintf("Turn %d: once upon a time there was a dog", k), aotlm.Request{MaxTokens: 16}, nil)
		if err != nil {
			t.Fatalf("turn %d: %v", k, err)
		}
		dropped += res.Dropped
		if len(res.PromptIDs)+16 > 96 {
			t.Fatalf("turn %d: %d prompt tokens in a context of 96", k, len(res.PromptIDs))
		}
	}
	if dropped == 0 {
		t.Fatal("8 turns in 96 positions dropped nothing")
	}
	if _, err := c.Send(context.Background(), strings.Repeat("a very long message ", 40), aotlm.Request{MaxTokens: 16}, nil); !errors.Is(err, aotlm.ErrPromptTooLong) {
		t.Fatalf("a message longer than the context: %v", err)
	}
}
