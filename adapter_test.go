package aotlm_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/lora"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestSessionAdapter: on an artifact that carries the qwen3 fixture's
// adapter, a session that chooses it generates what the artifact with
// the adapter merged generates; choosing none gives the base model's
// ids again, a change empties the session, and an unknown name is
// refused.
func TestSessionAdapter(t *testing.T) {
	src := testutil.Path(t, "arch/qwen3/model.gguf")
	adapter := filepath.Join("internal", "lora", "testdata", "qwen3")
	dir := t.TempDir()
	carry, merged := filepath.Join(dir, "carry.aot"), filepath.Join(dir, "merged.aot")
	if err := compile.CompileFile(src, carry, compile.Options{ARLens: []int{8}, Ctx: 64,
		Carry: []lora.Named{{Name: "tuned", Spec: lora.Spec{Path: adapter, Scale: 0.5}}}}); err != nil {
		t.Fatal(err)
	}
	if err := compile.CompileFile(src, merged, compile.Options{ARLens: []int{8}, Ctx: 64, LoRA: []lora.Spec{{Path: adapter, Scale: 0.5}}}); err != nil {
		t.Fatal(err)
	}
	gen := func(s *aotlm.Session) []int {
		t.Helper()
		r, err := s.Generate(context.Background(), aotlm.Request{IDs: []int{5, 9, 13}, MaxTokens: 12, IgnoreEOS: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.IDs
	}
	mm, err := aotlm.Open(merged, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer mm.Close()
	ms, err := mm.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	want := gen(ms)

	m, err := aotlm.Open(carry, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := m.Adapters(); !slices.Equal(got, []string{"tuned"}) {
		t.Fatalf("Adapters() = %v", got)
	}
	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := gen(s)
	if err := s.SetAdapter("tuned", 1); err != nil {
		t.Fatal(err)
	}
	if len(s.History()) != 0 {
		t.Errorf("choosing an adapter left %d positions in the session", len(s.History()))
	}
	if name, scale := s.Adapter(); name != "tuned" || scale != 1 {
		t.Errorf("Adapter() = %q, %g", name, scale)
	}
	if got := gen(s); !slices.Equal(got, want) || slices.Equal(got, base) {
		t.Errorf("with the carried adapter: %v; merged %v, base %v", got, want, base)
	}
	if err := s.SetAdapter("", 0); err != nil {
		t.Fatal(err)
	}
	if got := gen(s); !slices.Equal(got, base) {
		t.Errorf("without the adapter again: %v, base %v", got, base)
	}
	if err := s.SetAdapter("other", 1); err == nil {
		t.Error("an adapter that is not loaded was chosen")
	}
	if !m.RemoveAdapter("tuned") || len(m.Adapters()) != 0 {
		t.Error("RemoveAdapter did not unload it")
	}
}
