package engine_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// readFixtureFamilyRef reads arch/<family>/reference.json and checks it
// has a logits row per token and a split inside the tokens. A reference
// without split_prefill (an attention-only model, whose state is its
// cache) is split in the middle: the last logits after the split are the
// last row of the one pass.
func readFixtureFamilyRef(t *testing.T, family string) testutil.ArchReference {
	t.Helper()
	ref := testutil.ReadArchReference(t, family)
	if ref.Split.K == 0 && ref.Split.Last == nil && len(ref.Logits) > 0 {
		ref.Split.K, ref.Split.Last = len(ref.Tokens)/2, ref.Logits[len(ref.Logits)-1]
	}
	if len(ref.Logits) != len(ref.Tokens) || ref.Split.K <= 0 || ref.Split.K >= len(ref.Tokens) {
		t.Fatal("reference.json: want a logits row per token and a split inside the tokens")
	}
	return ref
}

// checkFixtureFamilyArtifact compiles arch/<family>, from its HF folder
// and from its GGUF when the fixture has one, with AR-8 and AR-16 plans,
// and checks against the reference (llama.cpp's, or an HF transcription's
// for a family llama.cpp cannot run) within tol: the logits of every
// position in kv mode (one token a pass) and in hybrid mode (passes of 8
// and 16 rows, the last padded), the last logits after a prefill split at
// reference.json's k, and the greedy ids.
func checkFixtureFamilyArtifact(t *testing.T, family string, tol float64) {
	t.Helper()
	ref := readFixtureFamilyRef(t, family)
	for src, path := range testutil.ArchModelPaths(t, family) {
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
			if d > tol {
				t.Errorf("%s: logits differ from the reference by %.3g", name, d)
			}

			s = newSession(t, e, opts)
			if _, err := s.Prefill(ref.Tokens[:ref.Split.K]); err != nil {
				t.Fatal(err)
			}
			last, err := s.Prefill(ref.Tokens[ref.Split.K:])
			if err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(last, ref.Split.Last); d > tol {
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
				t.Errorf("%s: greedy %v, reference %v", name, ids, ref.Greedy)
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

// decodeFixtureFrom decodes ref's tokens from position from on s, one a
// step, and returns the largest |logit diff| from llama.cpp's rows.
func decodeFixtureFrom(t *testing.T, s *engine.Session, ref testutil.ArchReference, from int) float64 {
	t.Helper()
	var d float64
	for i := from; i < len(ref.Tokens); i++ {
		out, err := s.Decode(ref.Tokens[i])
		if err != nil {
			t.Fatal(err)
		}
		d = max(d, maxDiff(out, ref.Logits[i]))
	}
	return d
}

// checkDecodesLikeFresh decodes ids on s and on fresh, one a step, and
// stops the test at the first whose logits differ by more than 1e-5.
func checkDecodesLikeFresh(t *testing.T, s, fresh *engine.Session, ids []int, what string) {
	t.Helper()
	for i, id := range ids {
		got, err := s.Decode(id)
		if err != nil {
			t.Fatal(err)
		}
		got = slices.Clone(got)
		want, err := fresh.Decode(id)
		if err != nil {
			t.Fatal(err)
		}
		if d := maxDiff(got, want); d > 1e-5 {
			t.Fatalf("%s, step %d: logits differ from a fresh session's by %.3g", what, i, d)
		}
	}
}
