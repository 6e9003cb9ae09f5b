package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// qwen35Ref is the part of the qwen35 fixture's reference.json these tests
// read.
type qwen35Ref struct {
	Tokens []int       `json:"tokens"`
	Logits [][]float32 `json:"logits"`
	Greedy []int       `json:"greedy"`
	Split  struct {
		K int `json:"k"`
	} `json:"split_prefill"`
}

// qwen35Tol is the engine's tolerance against the interpreter on the
// qwen35 fixture: its random weights amplify float32 rounding (the kv
// mode, the same arithmetic in SIMD order, is already 4e-5 away).
const qwen35Tol = 2.5e-4

// TestQwen35Parity checks the engine against the interpreter on the
// qwen35 fixture (Gated DeltaNet state carried across passes, padding rows
// kept out of it, the chunked delta rule in passes of several rows) for
// every prompt length 1..3N, in hybrid (AR-1, AR-8) and kv modes.
func TestQwen35Parity(t *testing.T) {
	m := loadModel(t, testutil.Path(t, "arch/qwen35"))
	e := compileModel(t, m, 64, 8)
	for _, n := range []int{1, 8} {
		t.Run(fmt.Sprintf("ar%d", n), func(t *testing.T) { checkParityTol(t, m, e, n, engine.ModeHybrid, qwen35Tol) })
	}
	t.Run("kv", func(t *testing.T) { checkParityTol(t, m, e, 8, engine.ModeKV, qwen35Tol) })
	t.Run("split", func(t *testing.T) {
		// the value heads of every gated_delta step across the workers
		defer engine.SplitEverything()()
		checkParityTol(t, m, e, 8, engine.ModeHybrid, qwen35Tol)
	})
}

// TestQwen35Reference compiles the qwen35 fixture from the HF folder and
// from the GGUF with an AR-8 plan (shorter than the 45-token prompt) and
// checks, in kv and hybrid modes, llama.cpp's logits at every position
// (1e-3), the prompt fed in two calls at split_prefill.k, and the 16
// greedy ids.
func TestQwen35Reference(t *testing.T) {
	var ref qwen35Ref
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/qwen35/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"arch/qwen35", "arch/qwen35/model.gguf"} {
		e := compileModel(t, loadModel(t, testutil.Path(t, src)), 96, 8)
		for _, mode := range []engine.Mode{engine.ModeKV, engine.ModeHybrid} {
			s := newSession(t, e, engine.SessionOptions{Mode: mode, Threads: 2})
			all := qwen35AllLogits(t, s, mode, ref.Tokens)
			d := 0.0
			for i, row := range ref.Logits {
				d = max(d, maxDiff(all[i], row))
			}
			t.Logf("%s %v: max |logit diff| %.3g vs llama.cpp", src, mode, d)
			if d > 1e-3 {
				t.Errorf("%s %v: logits differ from llama.cpp by %.3g (tolerance 1e-3)", src, mode, d)
			}

			s.Reset()
			if _, err := s.Prefill(ref.Tokens[:ref.Split.K]); err != nil {
				t.Fatal(err)
			}
			rest, err := s.PrefillAll(context.Background(), ref.Tokens[ref.Split.K:])
			if err != nil {
				t.Fatal(err)
			}
			d = 0
			for i, row := range rest {
				d = max(d, maxDiff(row, ref.Logits[ref.Split.K+i]))
			}
			if d > 1e-3 {
				t.Errorf("%s %v: split prefill differs from llama.cpp by %.3g", src, mode, d)
			}

			s.Reset()
			logits, err := s.Prefill(ref.Tokens)
			if err != nil {
				t.Fatal(err)
			}
			var ids []int
			for range ref.Greedy {
				id := argmax(logits)
				ids = append(ids, id)
				if logits, err = s.Decode(id); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(ids, ref.Greedy) {
				t.Errorf("%s %v: greedy %v, llama.cpp %v", src, mode, ids, ref.Greedy)
			}
		}
	}
}

// qwen35AllLogits returns the logits at every position of ids: in kv mode
// one Decode a token, in hybrid mode passes of the largest plan.
func qwen35AllLogits(t *testing.T, s *engine.Session, mode engine.Mode, ids []int) [][]float32 {
	t.Helper()
	if mode == engine.ModeHybrid {
		all, err := s.PrefillAll(context.Background(), ids)
		if err != nil {
			t.Fatal(err)
		}
		return all
	}
	var all [][]float32
	for _, id := range ids {
		l, err := s.Decode(id)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, slices.Clone(l))
	}
	return all
}

// TestQwen35Rewind checks that a recurrent session of three state sets
// rewinds to the pass boundaries whose state it keeps: rewinding then feeding the same tokens
// again gives the same logits, a boundary no longer kept is refused with
// an error listing the kept ones, an uncommitted pass is undone by
// rewinding to where the session is, and a session keeping one state
// rewinds only to 0.
func TestQwen35Rewind(t *testing.T) {
	var ref qwen35Ref
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/qwen35/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	e := compileModel(t, loadModel(t, testutil.Path(t, "arch/qwen35")), 96, 8)
	s := newSession(t, e, engine.SessionOptions{Threads: 2, StateSnapshots: 3})
	last := len(ref.Tokens) - 1
	if _, err := s.Prefill(ref.Tokens[:20]); err != nil { // passes end at 8, 16, 20
		t.Fatal(err)
	}
	if err := s.Rewind(16); err != nil {
		t.Fatal(err)
	}
	got, err := s.Prefill(ref.Tokens[16:])
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(got, ref.Logits[last]); d > 1e-3 {
		t.Errorf("after rewinding to 16: last logits differ from llama.cpp by %.3g", d)
	}

	// decode three steps, rewind two, decode them again
	var steps [][]float32
	pos := s.Pos()
	for _, id := range ref.Greedy[:3] {
		l, err := s.Decode(id)
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, slices.Clone(l))
	}
	if err := s.Rewind(pos + 1); err != nil {
		t.Fatal(err)
	}
	for i, id := range ref.Greedy[1:3] {
		l, err := s.Decode(id)
		if err != nil {
			t.Fatal(err)
		}
		if d := maxDiff(l, steps[i+1]); d != 0 {
			t.Errorf("decode step %d after rewind: logits differ by %.3g", i+1, d)
		}
	}
	if err := s.Rewind(16); err == nil || !strings.Contains(err.Error(), "cannot be rewound to 16") {
		t.Errorf("rewind to a dropped boundary: %v", err)
	}

	// an uncommitted pass is undone by rewinding to where the session is
	at := s.Pos()
	if _, err := s.Run(&engine.Pass{IDs: []int{5, 6, 7}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Rewind(at); err != nil {
		t.Fatal(err)
	}
	l, err := s.Decode(ref.Greedy[3])
	if err != nil {
		t.Fatal(err)
	}
	fresh := newSession(t, e, engine.SessionOptions{Threads: 2})
	if _, err := fresh.Prefill(append(slices.Clone(ref.Tokens), ref.Greedy[:3]...)); err != nil {
		t.Fatal(err)
	}
	want, err := fresh.Decode(ref.Greedy[3])
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(l, want); d > qwen35Tol {
		t.Errorf("after an undone pass: logits differ from a fresh session's by %.3g", d)
	}

	one := newSession(t, e, engine.SessionOptions{Threads: 2, StateSnapshots: 1})
	if _, err := one.Prefill(ref.Tokens[:20]); err != nil {
		t.Fatal(err)
	}
	if err := one.Rewind(16); err == nil {
		t.Error("a session keeping one state rewound to 16")
	}
	if err := one.Rewind(0); err != nil {
		t.Error(err)
	}
}
