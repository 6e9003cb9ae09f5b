package rotate

import (
	"math"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestGemma4Rotations: on the gemma4 fixture the online R3 (q and k of
// the layers that store keys, q alone of the layers that read a shared
// cache, in blocks of each layer's head size) and R4 (every down_proj
// input, 96 and 192 wide) keep the logits within 1e-4 of the largest; R1
// is refused, since the branches' outputs are normalized before the
// residual adds.
func TestGemma4Rotations(t *testing.T) {
	ref := testutil.ReadArchReference(t, "gemma4")
	dir := testutil.Path(t, "arch/gemma4/model.gguf")
	m := load(t, dir)
	want := logits(t, m, ref.Tokens)
	if _, err := Apply(m, Options{R1: quant.RotationRandom, Seed: 1}); err == nil || !strings.Contains(err.Error(), "R1 does not apply") {
		t.Fatalf("r1: want a refusal naming the norms after the branches, got %v", err)
	}
	m = load(t, dir)
	rep, err := Apply(m, Options{R3: quant.RotationHadamard, R4: quant.RotationHadamard})
	if err != nil {
		t.Fatal(err)
	}
	g, err := arch.Build(&m.Config, arch.BuildOptions{AllLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	hadamards := 0
	for _, n := range g.Nodes {
		if n.Op == op.Hadamard {
			hadamards++
		}
	}
	L, shared := m.Config.Layers, m.Config.Gemma4.SharedKVLayers
	if want := 2*L - shared + L; hadamards != want || rep.Down != L {
		t.Fatalf("%d hadamard steps, want %d (q of %d layers, k of %d, %d down projections); report %+v", hadamards, want, L, L-shared, L, rep)
	}
	got := logits(t, m, ref.Tokens)
	var scale, diff float64
	for i := range want {
		scale = max(scale, math.Abs(float64(want[i])))
		diff = max(diff, math.Abs(float64(got[i]-want[i])))
	}
	t.Logf("max |logit diff| %.3g of max |logit| %.3g", diff, scale)
	if diff > 1e-4*max(scale, 1) {
		t.Fatalf("rotated logits differ by %g (max |logit| %g)", diff, scale)
	}
}
