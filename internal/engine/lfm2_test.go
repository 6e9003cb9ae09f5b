package engine_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// lfm2Ref is the lfm2 fixture's reference.json: llama.cpp's logits at
// every position of tokens in one batch, its greedy ids, and the last
// logits after a prefill split at k.
type lfm2Ref struct {
	Tokens []int       `json:"tokens"`
	Logits [][]float32 `json:"logits"`
	Greedy []int       `json:"greedy"`
	Split  struct {
		K    int       `json:"k"`
		Last []float32 `json:"logits_after_split"`
	} `json:"split_prefill"`
}

// lfm2RefTol is the README's suggested tolerance for lfm2 against llama.cpp.
const lfm2RefTol = 1e-3

func readLFM2Ref(t *testing.T) lfm2Ref {
	var ref lfm2Ref
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/lfm2/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Logits) != len(ref.Tokens) || ref.Split.K <= 0 || ref.Split.K >= len(ref.Tokens) {
		t.Fatal("reference.json: want a logits row per token and a split inside the tokens")
	}
	return ref
}

// TestLFM2Artifact compiles the lfm2 fixture, from its HF folder and from
// its GGUF, with prefill plans shorter than the prompt (AR-8 and AR-16),
// and checks against llama.cpp: the logits of every position in kv mode
// (one token a pass) and hybrid mode (passes of 8 and 16 rows that carry
// the convolution state, the last padded), the last logits after a
// prefill in two calls split at reference.json's k, and the 16 greedy ids.
func TestLFM2Artifact(t *testing.T) {
	ref := readLFM2Ref(t)
	dir := testutil.Path(t, "arch/lfm2")
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
			if d > lfm2RefTol {
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
			if d := maxDiff(last, ref.Split.Last); d > lfm2RefTol {
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

// prefillAllAR feeds ids in chain passes of ar rows and returns the logits
// of every row.
func prefillAllAR(s *engine.Session, ids []int, ar int) ([][]float32, error) {
	var rows [][]float32
	for lo := 0; lo < len(ids); lo += ar {
		chunk := ids[lo:min(lo+ar, len(ids))]
		sel := make([]int, len(chunk))
		for i := range sel {
			sel[i] = i
		}
		out, err := s.Run(&engine.Pass{IDs: chunk, Logits: sel})
		if err != nil {
			return nil, err
		}
		for i := range out.Rows() {
			rows = append(rows, slices.Clone(out.Row(i)))
		}
		if err := s.Commit(sel); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// TestLFM2Rewind checks that a session of the lfm2 artifact rewinds its
// convolution state: after a prompt, rewinding to earlier positions (a
// pass boundary or not) and feeding the tokens again gives llama.cpp's
// logits; a pass of 8 rows committed in part, or dropped, continues as if
// only the committed rows had been fed; and a rewind beyond the kept
// window is refused, leaving the session as it was.
func TestLFM2Rewind(t *testing.T) {
	ref := readLFM2Ref(t)
	e := compileModel(t, loadModel(t, testutil.Path(t, "arch/lfm2")), 256, 8)
	s := newSession(t, e, engine.SessionOptions{Mode: engine.ModeHybrid, Threads: 2})
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
		if d > lfm2RefTol {
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
	for i := end - 64; i < end; i++ {
		got, err := s.Decode(long[i])
		if err != nil {
			t.Fatal(err)
		}
		got = slices.Clone(got)
		want, err := fresh.Decode(long[i])
		if err != nil {
			t.Fatal(err)
		}
		if d := maxDiff(got, want); d > 1e-5 {
			t.Fatalf("position %d after rewinding 64 back: logits differ from a fresh session's by %.3g", i, d)
		}
	}
}
