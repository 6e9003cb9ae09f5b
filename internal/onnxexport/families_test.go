package onnxexport

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// TestFamiliesFloatExport exports the per-family fixtures of the shared
// test data (random weights) with float activations and requires ONNX
// Runtime to reproduce the interpreter over each fixture's tokens (AR-16
// passes, the last padded) and 16 greedy AR-1 steps: the same ids and
// logits within familyTol. The families the export refuses must be
// refused with an error naming the op.
func TestFamiliesFloatExport(t *testing.T) {
	for _, fam := range []string{"llama", "qwen2", "qwen3", "gemma", "gemma3", "phi3", "granite", "smollm3", "glm"} {
		t.Run(fam, func(t *testing.T) {
			ortDir(t)
			dir := "arch/" + fam
			var ref struct {
				Tokens []int `json:"tokens"`
			}
			if err := json.Unmarshal(testutil.ReadFile(t, dir+"/reference.json"), &ref); err != nil {
				t.Fatal(err)
			}
			m := loadModel(t, dir)
			out := t.TempDir()
			const ctx = 96
			if err := Export(out, m, Options{ARLen: 16, Context: ctx}); err != nil {
				t.Fatal(err)
			}
			want := greedyRef(t, m, ref.Tokens, 16, ctx)
			got := runORT(t, out, ref.Tokens, 16)
			for i := range want.IDs {
				if i >= len(got.IDs) || got.IDs[i] != want.IDs[i] {
					t.Fatalf("greedy ids differ at step %d:\nort    %v\naotlm  %v", i, got.IDs, want.IDs)
				}
			}
			d := maxDiff(t, got.Logits, want.Logits)
			t.Logf("%d tokens, 16 ids equal, max |logit diff| %.2e", len(ref.Tokens), d)
			if d > familyTol {
				t.Fatalf("logits differ by %.3g > %g", d, familyTol)
			}
		})
	}
	for _, c := range []struct{ fam, op string }{
		{"lfm2", "causal_conv"}, {"granitehybrid", "causal_conv"}, {"qwen35", "causal_conv"}, {"gemma4", "shared_attention"},
	} {
		t.Run(c.fam, func(t *testing.T) {
			m := loadModel(t, "arch/"+c.fam)
			err := Export(t.TempDir(), m, Options{ARLen: 4, Context: 16})
			if err == nil || !strings.Contains(err.Error(), "op "+c.op+" ") {
				t.Fatalf("got %v, want a refusal naming op %s", err, c.op)
			}
			t.Log(err)
		})
	}
}

// familyTol bounds the logit difference on the random-weight fixtures,
// whose logits reach a few tens.
const familyTol = 2e-3
