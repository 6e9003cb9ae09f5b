package aotlm_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestMTPStrategy: the qwen35 fixture's artifact carries its draft head,
// and Generate with MTPStrategy gives plain greedy decoding's ids on a
// random and a repetitive prompt, reporting verify passes and tokens per
// pass; a model without a head refuses the strategy.
func TestMTPStrategy(t *testing.T) {
	out := filepath.Join(t.TempDir(), "qwen35.aot")
	if err := compile.CompileFile(testutil.Path(t, "arch/qwen35/model.gguf"), out,
		compile.Options{ARLens: []int{8}, Ctx: 128}); err != nil {
		t.Fatal(err)
	}
	m, err := aotlm.Open(out, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !m.HasMTP() {
		t.Fatal("the qwen35 artifact has no multi-token-prediction head")
	}
	st, err := m.MTPStrategy(aotlm.MTPOptions{DraftMax: 3, Adapt: aotlm.Adapt{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Name() != "mtp" {
		t.Fatalf("name %q", st.Name())
	}
	gen := func(ids []int, st *aotlm.Strategy) *aotlm.Result {
		t.Helper()
		s, err := m.NewSession(0)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		res, err := s.Generate(context.Background(), aotlm.Request{IDs: ids, MaxTokens: 32, IgnoreEOS: true, Strategy: st}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, ids := range [][]int{{17, 230, 91, 4, 300, 122, 45}, slices.Repeat([]int{60, 61, 62, 63}, 4)} {
		want := gen(ids, nil)
		got := gen(ids, st)
		if !slices.Equal(got.IDs, want.IDs) {
			t.Fatalf("ids %v, want plain decoding's %v", got.IDs, want.IDs)
		}
		d := got.Decoding
		if d == nil || d.Strategy != "mtp" || d.Verify == 0 || d.Drafted == 0 || d.Note != "" {
			t.Fatalf("report %+v: want verify passes of drafts", d)
		}
		if d.TokensPerPass() < 1 || (d.Accepted > 0) != (d.TokensPerPass() > 1) {
			t.Errorf("%d drafts kept and %.2f tokens per pass", d.Accepted, d.TokensPerPass())
		}
		t.Logf("%s", d)
	}
	if _, err := openStories(t).MTPStrategy(aotlm.MTPOptions{}); !errors.Is(err, aotlm.ErrNoMTP) {
		t.Errorf("a model without a head: %v, want ErrNoMTP", err)
	}
}
