package engine_test

import (
	"fmt"
	"testing"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// lfm2RefTol is the README's suggested tolerance for lfm2 against llama.cpp.
const lfm2RefTol = 1e-3

// TestLFM2Artifact compiles the lfm2 fixture, from its HF folder and from
// its GGUF, with prefill plans shorter than the prompt (AR-8 and AR-16),
// and checks against llama.cpp: the logits of every position in kv mode
// (one token a pass) and hybrid mode (passes of 8 and 16 rows that carry
// the convolution state, the last padded), the last logits after a
// prefill in two calls split at reference.json's k, and the 16 greedy ids.
func TestLFM2Artifact(t *testing.T) {
	checkFixtureFamilyArtifact(t, "lfm2", lfm2RefTol)
}

// TestLFM2Rewind checks that a session of the lfm2 artifact rewinds its
// convolution state: after a prompt, rewinding to earlier positions (a
// pass boundary or not) and feeding the tokens again gives llama.cpp's
// logits; a pass of 8 rows committed in part, or dropped, continues as if
// only the committed rows had been fed; and a rewind beyond the kept
// window is refused, leaving the session as it was.
func TestLFM2Rewind(t *testing.T) {
	ref := readFixtureFamilyRef(t, "lfm2")
	e := compileModel(t, loadModel(t, testutil.Path(t, "arch/lfm2")), 256, 8)
	s := newSession(t, e, engine.SessionOptions{Mode: engine.ModeHybrid, Threads: 2})
	n := len(ref.Tokens)
	check := func(what string, from int) {
		t.Helper()
		if d := decodeFixtureFrom(t, s, ref, from); d > lfm2RefTol {
			t.Errorf("%s: logits after it differ from llama.cpp by %.3g", what, d)
		}
	}
	if _, err := s.Prefill(ref.Tokens); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{n - 1, n - 5, 24, 17, 1} {
		if err := s.Rewind(p); err != nil {
			t.Fatalf("rewind to %d: %v", p, err)
		}
		check(fmt.Sprintf("rewind from %d to %d", n, p), p)
	}

	// a pass of 8 rows, committed in part, then dropped
	if err := s.Rewind(20); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(&engine.Pass{IDs: ref.Tokens[20:28]}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit([]int{0, 1, 2}); err != nil {
		t.Fatalf("commit 3 rows of 8: %v", err)
	}
	if _, err := s.Run(&engine.Pass{IDs: ref.Tokens[23:31]}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(nil); err != nil {
		t.Fatal(err)
	}
	if s.Pos() != 23 {
		t.Fatalf("position %d after committing 3 rows at 20, want 23", s.Pos())
	}
	check("a partly committed pass and a dropped one", 23)

	// a long sequence: the prompt three times over
	var long []int
	for range 3 {
		long = append(long, ref.Tokens...)
	}
	s.Reset()
	if _, err := s.Prefill(long); err != nil {
		t.Fatal(err)
	}
	end := len(long)
	if err := s.Rewind(end - 65); err == nil {
		t.Fatalf("rewind %d positions back: no error", 65)
	}
	out, err := s.Decode(7)
	if err != nil {
		t.Fatal(err)
	}
	fresh := newSession(t, e, engine.SessionOptions{Mode: engine.ModeKV, Threads: 2})
	if _, err := fresh.Prefill(long); err != nil {
		t.Fatal(err)
	}
	want, err := fresh.Decode(7)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(out, want); d > 1e-5 {
		t.Errorf("after a refused rewind, the next logits differ from a fresh session's by %.3g", d)
	}
	long = append(long, 7)
	end = len(long)
	if err := s.Rewind(end - 64); err != nil {
		t.Fatalf("rewind 64 positions back: %v", err)
	}
	fresh.Reset()
	if _, err := fresh.Prefill(long[:end-64]); err != nil {
		t.Fatal(err)
	}
	checkDecodesLikeFresh(t, s, fresh, long[end-64:], "after rewinding 64 back")
}
