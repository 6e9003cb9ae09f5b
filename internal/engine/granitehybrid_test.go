package engine_test

import (
	"fmt"
	"testing"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// graniteHybridRefTol is the README's suggested tolerance for
// granitehybrid against llama.cpp.
const graniteHybridRefTol = 1e-3

// TestGraniteHybridArtifact compiles the granitehybrid fixture, from its
// HF folder and from its GGUF, with prefill plans shorter than the prompt
// (AR-8 and AR-16), and checks against llama.cpp: the logits of every
// position in kv mode (one token a pass) and hybrid mode (passes of 8 and
// 16 rows, each scanned in one ssm_scan call that carries the Mamba2 and
// convolution states, the last padded), the last logits after a prefill
// in two calls split at reference.json's k, and the 16 greedy ids.
func TestGraniteHybridArtifact(t *testing.T) {
	checkFixtureFamilyArtifact(t, "granitehybrid", graniteHybridRefTol)
}

// TestGraniteHybridRewind checks that a session of the granitehybrid
// artifact rewinds its Mamba2 and convolution states to the start of a
// recent pass: after a prompt fed in passes of 8, rewinding to a pass
// boundary and feeding the tokens again gives llama.cpp's logits, as does
// rewinding a few decode steps; a dropped pass leaves the state as it
// was; a pass committed in part replays its kept rows, so decoding goes
// on as llama.cpp's; a rewind inside a pass, or to a pass older than the
// snapshots kept, is refused and changes nothing.
func TestGraniteHybridRewind(t *testing.T) {
	ref := readFixtureFamilyRef(t, "granitehybrid")
	e := compileModel(t, loadModel(t, testutil.Path(t, "arch/granitehybrid")), 256, 8)
	s := newSession(t, e, engine.SessionOptions{Mode: engine.ModeHybrid, ARLen: 8, Threads: 2})
	n := len(ref.Tokens)
	check := func(what string, from int) {
		t.Helper()
		d := decodeFixtureFrom(t, s, ref, from)
		t.Logf("%s: max |logit diff| %.3g", what, d)
		if d > graniteHybridRefTol {
			t.Errorf("%s: logits after it differ from llama.cpp by %.3g", what, d)
		}
	}
	prefill := func(from int) {
		t.Helper()
		if _, err := prefillAllAR(s, ref.Tokens[from:], 8); err != nil {
			t.Fatal(err)
		}
	}
	prefill(0)
	if err := s.Rewind(24); err != nil {
		t.Fatalf("rewind to the pass boundary 24: %v", err)
	}
	check("rewind to 24", 24) // decodes 24..n-1: snapshots at each of them
	for _, p := range []int{n - 1, n - 3, n - 10} {
		if err := s.Rewind(p); err != nil {
			t.Fatalf("rewind to decode step %d: %v", p, err)
		}
		check(fmt.Sprintf("rewind to decode step %d", p), p)
	}

	s.Reset()
	prefill(0)
	if err := s.Rewind(21); err == nil {
		t.Error("rewind inside a pass: accepted")
	}
	if err := s.Rewind(40); err != nil {
		t.Fatalf("rewind to the last pass's start: %v", err)
	}
	// a pass dropped leaves the state at 40
	if _, err := s.Run(&engine.Pass{IDs: ref.Tokens[40:46]}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(nil); err != nil {
		t.Fatalf("drop a pass: %v", err)
	}
	check("a dropped pass", 40)
	// a pass committed in part: its first rows replayed, at 42
	if err := s.Rewind(40); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(&engine.Pass{IDs: ref.Tokens[40:46]}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit([]int{0, 1}); err != nil || s.Pos() != 42 {
		t.Fatalf("commit 2 rows of 6: %v, position %d; want 42", err, s.Pos())
	}
	check("a pass committed in part", 42)

	// more passes than snapshots: the oldest boundaries are gone
	s.Reset()
	for range 3 {
		prefill(0)
		if err := s.Rewind(0); err != nil {
			t.Fatal(err)
		}
	}
	prefill(0)
	for i := 0; i < 24; i++ {
		if _, err := s.Decode(ref.Tokens[i%n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Rewind(n - 7); err == nil {
		t.Error("rewind to a boundary older than the snapshots kept: accepted")
	}
	if err := s.Rewind(n + 20); err != nil {
		t.Fatalf("rewind 4 decode steps back: %v", err)
	}
	fresh := newSession(t, e, engine.SessionOptions{Mode: engine.ModeKV, Threads: 2})
	var seq []int
	seq = append(seq, ref.Tokens...)
	for i := 0; i < 20; i++ {
		seq = append(seq, ref.Tokens[i%n])
	}
	if _, err := fresh.Prefill(seq); err != nil {
		t.Fatal(err)
	}
	var next []int
	for i := 20; i < 24; i++ {
		next = append(next, ref.Tokens[i%n])
	}
	checkDecodesLikeFresh(t, s, fresh, next, "after rewinding 4 decode steps back")
}
