package engine_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// graniteHybridRefTol is the README's suggested tolerance for
// granitehybrid against llama.cpp.
const graniteHybridRefTol = 1e-3

// readGraniteHybridRef reads the granitehybrid fixture's reference.json
// (the same fields as lfm2's).
func readGraniteHybridRef(t *testing.T) lfm2Ref {
	var ref lfm2Ref
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/granitehybrid/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Logits) != len(ref.Tokens) || ref.Split.K <= 0 || ref.Split.K >= len(ref.Tokens) {
		t.Fatal("reference.json: want a logits row per token and a split inside the tokens")
	}
	return ref
}

// TestGraniteHybridArtifact compiles the granitehybrid fixture, from its
// HF folder and from its GGUF, with prefill plans shorter than the prompt
// (AR-8 and AR-16), and checks against llama.cpp: the logits of every
// position in kv mode (one token a pass) and hybrid mode (passes of 8 and
// 16 rows, each scanned in one ssm_scan call that carries the Mamba2 and
// convolution states, the last padded), the last logits after a prefill
// in two calls split at reference.json's k, and the 16 greedy ids.
func TestGraniteHybridArtifact(t *testing.T) {
	ref := readGraniteHybridRef(t)
	dir := testutil.Path(t, "arch/granitehybrid")
	for src, path := range map[string]string{"hf": dir, "gguf": dir + "/model.gguf"} {
		e := compileModel(t, loadModel(t, path), 128, 8, 16)
		for _, c := range []struct {
			mode engine.Mode
			ar   int
		}{{engine.ModeKV, 0}, {engine.ModeHybrid, 8}, {engine.ModeHybrid, 16}} {
			name := fmt.Sprintf("%s/%v/ar%d", src, c.mode, c.ar)
			opts := engine.SessionOptions{Mode: c.mode, ARLen: c.ar, Threads: 2}
			s := newSession(t, e, opts)
			var rows [][]float32
			if c.mode == engine.ModeKV {
				for _, id := range ref.Tokens {
					out, err := s.Decode(id)
					if err != nil {
						t.Fatal(err)
					}
					rows = append(rows, slices.Clone(out))
				}
			} else {
				var err error
				if rows, err = prefillAllAR(s, ref.Tokens, c.ar); err != nil {
					t.Fatal(err)
				}
			}
			var d float64
			for i, want := range ref.Logits {
				d = max(d, maxDiff(rows[i], want))
			}
			t.Logf("%s: every position, max |logit diff| %.3g", name, d)
			if d > graniteHybridRefTol {
				t.Errorf("%s: logits differ from llama.cpp by %.3g", name, d)
			}

			s = newSession(t, e, opts)
			if _, err := s.Prefill(ref.Tokens[:ref.Split.K]); err != nil {
				t.Fatal(err)
			}
			last, err := s.Prefill(ref.Tokens[ref.Split.K:])
			if err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(last, ref.Split.Last); d > graniteHybridRefTol {
				t.Errorf("%s: split prefill at %d: last logits differ by %.3g", name, ref.Split.K, d)
			}
			var ids []int
			for range ref.Greedy {
				id := argmax(last)
				ids = append(ids, id)
				if last, err = s.Decode(id); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(ids, ref.Greedy) {
				t.Errorf("%s: greedy %v, llama.cpp %v", name, ids, ref.Greedy)
			}
		}
	}
}

// TestGraniteHybridRewind checks that a session of the granitehybrid
// artifact rewinds its Mamba2 and convolution states to the start of a
// recent pass: after a prompt fed in passes of 8, rewinding to a pass
// boundary and feeding the tokens again gives llama.cpp's logits, as does
// rewinding a few decode steps; a dropped pass leaves the state as it
// was; a rewind inside a pass, or to a pass older than the snapshots
// kept, and a partial commit are refused and change nothing.
func TestGraniteHybridRewind(t *testing.T) {
	ref := readGraniteHybridRef(t)
	e := compileModel(t, loadModel(t, testutil.Path(t, "arch/granitehybrid")), 256, 8)
	s := newSession(t, e, engine.SessionOptions{Mode: engine.ModeHybrid, ARLen: 8, Threads: 2})
	n := len(ref.Tokens)
	check := func(what string, from int) {
		t.Helper()
		var d float64
		for i := from; i < n; i++ {
			out, err := s.Decode(ref.Tokens[i])
			if err != nil {
				t.Fatal(err)
			}
			d = max(d, maxDiff(out, ref.Logits[i]))
		}
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
	// a pass dropped, then one committed in part: both leave the state at 40
	if _, err := s.Run(&engine.Pass{IDs: ref.Tokens[40:46]}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(nil); err != nil {
		t.Fatalf("drop a pass: %v", err)
	}
	if _, err := s.Run(&engine.Pass{IDs: ref.Tokens[40:46]}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit([]int{0, 1}); err == nil || s.Pos() != 40 {
		t.Errorf("commit 2 rows of 6: %v, position %d; want a refusal at 40", err, s.Pos())
	}
	if err := s.Commit(nil); err != nil {
		t.Fatal(err)
	}
	check("a dropped pass", 40)

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
	for i := 20; i < 24; i++ {
		got, err := s.Decode(ref.Tokens[i%n])
		if err != nil {
			t.Fatal(err)
		}
		got = slices.Clone(got)
		want, err := fresh.Decode(ref.Tokens[i%n])
		if err != nil {
			t.Fatal(err)
		}
		if d := maxDiff(got, want); d > 1e-5 {
			t.Fatalf("decode step %d after rewinding 4 back: logits differ from a fresh session's by %.3g", i, d)
		}
	}
}
