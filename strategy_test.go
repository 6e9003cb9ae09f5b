package aotlm_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

// openStories compiles stories260K (plans of 1 and 16 rows) and opens it.
func openStories(t *testing.T) *aotlm.Model {
	t.Helper()
	out := filepath.Join(t.TempDir(), "stories.aot")
	if err := compile.CompileFile(testutil.Path(t, "models/stories260K/stories260K.gguf"), out,
		compile.Options{ARLens: []int{16}, Ctx: 256}); err != nil {
		t.Fatal(err)
	}
	m, err := aotlm.Open(out, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestGenerateStrategies: Generate with each strategy gives plain greedy
// decoding's ids and text, reports its passes, and leaves the session's
// history equal to what its cache holds, also when a stop string ends
// generation inside a run of tokens a pass chose together.
func TestGenerateStrategies(t *testing.T) {
	m := openStories(t)
	off := aotlm.Adapt{Off: true}
	lookahead, err := aotlm.Lookahead(aotlm.LookaheadOptions{N: 3, W: 5, G: 3, Adapt: off})
	if err != nil {
		t.Fatal(err)
	}
	lookup, err := aotlm.PromptLookup(aotlm.LookupOptions{DraftMax: 6, Adapt: off})
	if err != nil {
		t.Fatal(err)
	}
	draft, err := m.DraftStrategy(m, aotlm.DraftOptions{DraftMax: 4, Adapt: off})
	if err != nil {
		t.Fatal(err)
	}
	strategies := []*aotlm.Strategy{lookahead, lookup, draft}
	gen := func(st *aotlm.Strategy, stop []string) *aotlm.Result {
		t.Helper()
		s, err := m.NewSession(0)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		res, err := s.Generate(context.Background(), aotlm.Request{Prompt: "Tom had a red ball. Tom had a red ball. Tom had",
			MaxTokens: 80, Stop: stop, Strategy: st}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := s.Sequence().Pos(), len(s.History()); got != want {
			t.Fatalf("the cache holds %d positions, the history %d", got, want)
		}
		if want := append(slices.Clone(res.PromptIDs), res.IDs...); !slices.Equal(s.History(), want[:len(s.History())]) ||
			len(s.History()) < len(want)-1 {
			t.Fatalf("history %v is not the prompt and the generated ids", s.History())
		}
		return res
	}
	want := gen(nil, nil)
	if want.Decoding != nil {
		t.Fatal("plain decoding reported a strategy")
	}
	// a stop string from the middle of the plain text
	words := strings.Fields(want.Text)
	stop := words[len(words)/2]
	wantStop := gen(nil, []string{stop})
	for _, st := range strategies {
		got := gen(st, nil)
		if !slices.Equal(got.IDs, want.IDs) || got.Text != want.Text {
			t.Fatalf("%s: ids %v, want plain decoding's %v", st.Name(), got.IDs, want.IDs)
		}
		if got.Decoding == nil || got.Decoding.Strategy != st.Name() || got.Decoding.Verify == 0 || got.Decoding.Accepted == 0 {
			t.Fatalf("%s: report %+v: want verify passes with accepted guesses", st.Name(), got.Decoding)
		}
		got = gen(st, []string{stop})
		if got.Text != wantStop.Text || got.StopReason != aotlm.StopString || !slices.Equal(got.IDs, wantStop.IDs) {
			t.Fatalf("%s with stop %q: %q (%s), want %q", st.Name(), stop, got.Text, got.StopReason, wantStop.Text)
		}
	}
}

// TestStrategyRefusesLogitsHook: a logits hook sees only plain passes'
// logits, so a request with both is refused rather than silently
// unconstrained.
func TestStrategyRefusesLogitsHook(t *testing.T) {
	m := openStories(t)
	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lookup, err := aotlm.PromptLookup(aotlm.LookupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Generate(context.Background(), aotlm.Request{Prompt: "Once", MaxTokens: 4,
		Strategy: lookup, Logits: func([]float32, []int) {}}, nil)
	if err == nil || !strings.Contains(err.Error(), "logits hook") {
		t.Fatalf("got %v, want a refusal naming the logits hook", err)
	}
}

// TestCheckDraft: a model drafts for itself; one of another vocabulary is
// refused with ErrTokenizerMismatch.
func TestCheckDraft(t *testing.T) {
	m := openStories(t)
	if err := m.CheckDraft(m); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "llama.aot")
	if err := compile.CompileFile(testutil.Path(t, "arch/llama"), out, compile.Options{Ctx: 64}); err != nil {
		t.Fatal(err)
	}
	other, err := aotlm.Open(out, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := m.CheckDraft(other); !errors.Is(err, aotlm.ErrTokenizerMismatch) {
		t.Fatalf("a draft of another vocabulary: %v, want ErrTokenizerMismatch", err)
	}
}
