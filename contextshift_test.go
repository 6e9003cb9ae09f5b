package aotlm_test

import (
	"context"
	"slices"
	"testing"

	"github.com/aotlm/aotlm"
)

// TestContextShift: on a 32-position session, generation without
// ContextShift stops with StopContext when the cache is full; with it
// (Keep -1, the prompt), it goes on to MaxTokens, reporting its shifts,
// and after the first shift its greedy ids are those of a fresh session
// prompted with what the shift kept: the prompt, the newer half of the
// generated tokens in the cache, and the token that did not fit.
func TestContextShift(t *testing.T) {
	const ctx = 32
	for _, mode := range []string{"hybrid", "kv"} {
		m := stories(t, mode)
		s, err := m.NewSession(ctx)
		if err != nil {
			t.Fatal(err)
		}
		req := aotlm.Request{Prompt: "Once upon a time", MaxTokens: 80, IgnoreEOS: true}
		full, err := s.Generate(context.Background(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := len(full.PromptIDs)
		if full.StopReason != aotlm.StopContext || len(full.IDs) != ctx-p+1 || full.Shifts != 0 {
			t.Fatalf("%s without a shift: %s after %d ids (%d shifts), want %s after %d", mode, full.StopReason, len(full.IDs), full.Shifts, aotlm.StopContext, ctx-p+1)
		}
		req.ContextShift = &aotlm.ContextShift{Keep: -1}
		res, err := s.Generate(context.Background(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.StopReason != aotlm.StopLength || len(res.IDs) != req.MaxTokens {
			t.Fatalf("%s with a shift: %s after %d ids, want %s after %d", mode, res.StopReason, len(res.IDs), aotlm.StopLength, req.MaxTokens)
		}
		if !slices.Equal(res.IDs[:ctx-p+1], full.IDs) {
			t.Errorf("%s: ids before the first shift %v, without a shift %v", mode, res.IDs[:ctx-p+1], full.IDs)
		}
		drop := (ctx - p) / 2
		if res.Shifts < 2 || res.Shifted < 2*drop {
			t.Errorf("%s: %d shifts dropping %d tokens in %d ids, want at least 2 dropping %d", mode, res.Shifts, res.Shifted, len(res.IDs), 2*drop)
		}
		hist := append(slices.Clone(res.PromptIDs), res.IDs[:ctx-p]...)
		kept := append(append(slices.Clone(hist[:p]), hist[p+drop:]...), res.IDs[ctx-p])
		fresh, err := m.NewSession(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want, err := fresh.Generate(context.Background(), aotlm.Request{IDs: kept, IgnoreEOS: true}, nil)
		fresh.Close()
		if err != nil {
			t.Fatal(err)
		}
		after := res.IDs[ctx-p+1:]
		if n := len(want.IDs); n < 2 || n > len(after) || !slices.Equal(after[:n], want.IDs) {
			t.Errorf("%s: ids after the first shift %v, a fresh session on the kept tokens %v", mode, after[:min(len(want.IDs), len(after))], want.IDs)
		}
		// a Keep that leaves nothing to drop stops at the full context
		req.ContextShift = &aotlm.ContextShift{Keep: ctx}
		res, err = s.Generate(context.Background(), req, nil)
		if err != nil || res.StopReason != aotlm.StopContext || res.Shifts != 0 {
			t.Errorf("%s: keeping the whole context: %v, %s, %d shifts; want %s", mode, err, res.StopReason, res.Shifts, aotlm.StopContext)
		}
		s.Close()
	}
}
