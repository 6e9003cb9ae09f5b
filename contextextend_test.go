package aotlm_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestContextBeyondCompiled opens stories260K (its GGUF says 2048
// positions) compiled for 128 with Options.Context 400: the model reports
// 400 of at most 2048, and a greedy generation of 300 tokens past the 128
// compiled positions gives the ids of the model compiled for 400; 3000
// positions are refused naming 3000 and 2048.
func TestContextBeyondCompiled(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	dir := t.TempDir()
	short, full := filepath.Join(dir, "short.aot"), filepath.Join(dir, "full.aot")
	for path, ctx := range map[string]int{short: 128, full: 400} {
		if err := compile.CompileFile(src, path, compile.Options{ARLens: []int{16}, Ctx: ctx}); err != nil {
			t.Fatal(err)
		}
	}
	gen := func(path string) []int {
		m, err := aotlm.Open(path, aotlm.Options{Threads: 2, Context: 400})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if i := m.Info(); i.Context != 400 || i.MaxContext != 2048 {
			t.Fatalf("%s: context %d of at most %d, want 400 of 2048", filepath.Base(path), i.Context, i.MaxContext)
		}
		s, err := m.NewSession(0)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		res, err := s.Generate(context.Background(), aotlm.Request{Prompt: "Once upon a time", MaxTokens: 300, IgnoreEOS: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.PromptIDs)+len(res.IDs) <= 128 {
			t.Fatalf("%d positions: the run does not pass the compiled context", len(res.PromptIDs)+len(res.IDs))
		}
		return res.IDs
	}
	if got, want := gen(short), gen(full); !slices.Equal(got, want) {
		t.Errorf("extended from 128 positions: %v\ncompiled for 400: %v", got, want)
	}
	_, err := aotlm.Open(short, aotlm.Options{Threads: 1, Context: 3000})
	if err == nil || !strings.Contains(err.Error(), "3000") || !strings.Contains(err.Error(), "2048") {
		t.Errorf("3000 positions of a model trained for 2048: %v", err)
	}
}
