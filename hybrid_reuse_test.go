package aotlm_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestHybridReuse: on a hybrid model (the qwen35 fixture: Gated DeltaNet
// layers beside gated attention) a session that holds a prefix of the
// prompt rewinds its recurrent state to a kept pass boundary inside that
// prefix and prefills only from there; its greedy ids equal a fresh
// session's. A chat's second turn reuses the first turn's prompt the same
// way.
func TestHybridReuse(t *testing.T) {
	out := filepath.Join(t.TempDir(), "qwen35.aot")
	if err := compile.CompileFile(testutil.Path(t, "arch/qwen35/model.gguf"), out, compile.Options{ARLens: []int{8}, Ctx: 256}); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"hybrid", "kv"} {
		m, err := aotlm.Open(out, aotlm.Options{Threads: 2, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		s, _ := m.NewSession(0)
		defer s.Close()
		first, err := s.Generate(context.Background(), aotlm.Request{Prompt: "Once upon a time there was", MaxTokens: 12}, nil)
		if err != nil {
			t.Fatal(err)
		}
		tail, err := m.Encode(" and then", true)
		if err != nil {
			t.Fatal(err)
		}
		next := append(append(slices.Clone(first.PromptIDs), first.IDs...), tail...)
		got, err := s.Generate(context.Background(), aotlm.Request{IDs: next, MaxTokens: 12}, nil)
		if err != nil {
			t.Fatal(err)
		}
		fresh, _ := m.NewSession(0)
		defer fresh.Close()
		want, err := fresh.Generate(context.Background(), aotlm.Request{IDs: next, MaxTokens: 12}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: reused %d of %d prompt tokens (the first prompt had %d, its reply %d)", mode, got.Reused, len(next), len(first.PromptIDs), len(first.IDs))
		if got.Reused < len(first.PromptIDs) {
			t.Errorf("%s: reused %d prompt tokens, fewer than the first prompt's %d", mode, got.Reused, len(first.PromptIDs))
		}
		if !slices.Equal(got.IDs, want.IDs) {
			t.Errorf("%s: with reuse %v, fresh %v", mode, got.IDs, want.IDs)
		}

		if err := m.SetChatTemplate("plain", "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"); err != nil {
			t.Fatal(err)
		}
		c, err := m.NewChat(aotlm.ChatOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r1, err := c.Send(context.Background(), "Tell me a story", aotlm.Request{MaxTokens: 8}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := c.Send(context.Background(), "Go on", aotlm.Request{MaxTokens: 8}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r2.Reused < len(r1.PromptIDs) || r2.Reused >= len(r2.PromptIDs) {
			t.Errorf("%s: chat turn 2 reused %d of %d prompt tokens; turn 1's prompt had %d", mode, r2.Reused, len(r2.PromptIDs), len(r1.PromptIDs))
		}
	}
}
