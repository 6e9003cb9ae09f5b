package rotate_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/rotate"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestRotationThroughCompile checks that a rotated float model (R1..R4,
// the online R3 and R4 as hadamard steps of the plans) stays exact once
// compiled: the artifact's logits (float32 weights, AR-1 and AR-8
// plans) equal the original model's interpreter logits within 1e-4 of the
// largest logit.
func TestRotationThroughCompile(t *testing.T) {
	for _, c := range []struct{ name, path string }{
		{"stories260K", "models/stories260K/stories260K.gguf"},
		{"llama", "arch/llama"},
		{"gemma", "arch/gemma"},
		{"qwen2", "arch/qwen2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := rotate.Load(t, testutil.Path(t, c.path))
			ids := []int{1, 5, 9, 2, 7, 3, 8, 4, 6, 10, 11, 3, 12, 14, 15, 2, 9}
			want := rotate.Logits(t, m, ids)
			opts := rotate.Options{R1: quant.RotationRandom, R2: quant.RotationRandom, R3: quant.RotationHadamard, R4: quant.RotationHadamard, Seed: 3}
			if _, err := rotate.Apply(m, opts); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "r.aot")
			if err := compile.CompileModel(m, compile.Source{}, compile.Options{ARLens: []int{8}, Ctx: 32}, out); err != nil {
				t.Fatal(err)
			}
			am, err := aotlm.Open(out, aotlm.Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer am.Close()
			s, err := am.NewSession(32)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := s.Logits(context.Background(), ids)
			if err != nil {
				t.Fatal(err)
			}
			V := len(want) / len(ids)
			var scale, diff float64
			for i, row := range rows {
				for j, v := range row {
					w := float64(want[i*V+j])
					scale = max(scale, math.Abs(w))
					diff = max(diff, math.Abs(float64(v)-w))
				}
			}
			t.Logf("%s: compiled rotated model vs original: max |logit diff| %.3g of %.3g", c.name, diff, scale)
			if diff > 1e-4*max(scale, 1) {
				t.Fatalf("compiled rotated logits differ by %g (max |logit| %g)", diff, scale)
			}
		})
	}
}
