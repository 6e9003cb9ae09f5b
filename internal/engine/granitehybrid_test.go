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
