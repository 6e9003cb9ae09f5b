package rotate

import (
	"math"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestGraniteHybridRotations: on the granitehybrid fixture R1 (the
// residual stream, which feeds the Mamba2 in_proj as it feeds q, k and v),
// the online R3 (q and k of the attention layers, which have no RoPE) and
// R4 (every shared_mlp.output_linear input) keep the logits within 1e-4
// of the largest.
func TestGraniteHybridRotations(t *testing.T) {
	ref := testutil.ReadArchReference(t, "granitehybrid")
	dir := testutil.Path(t, "arch/granitehybrid")
	m := load(t, dir)
	want := logits(t, m, ref.Tokens)
	rep, err := Apply(m, Options{R1: quant.RotationRandom, R3: quant.RotationHadamard, R4: quant.RotationHadamard, Seed: 5})
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
	L := m.Config.Layers
	attn := L - len(m.Config.Mamba.Layers)
	if hadamards != 2*attn+L || rep.Down != L || rep.Linears == 0 {
		t.Fatalf("%d hadamard steps for %d layers (%d attention), report %+v", hadamards, L, attn, rep)
	}
	got := logits(t, m, ref.Tokens)
	var scale, diff float64
	for i := range want {
		scale = max(scale, math.Abs(float64(want[i])))
		diff = max(diff, math.Abs(float64(got[i]-want[i])))
	}
	t.Logf("%d linears rotated; max |logit diff| %.3g of max |logit| %.3g", rep.Linears, diff, scale)
	if diff > 1e-4*max(scale, 1) {
		t.Fatalf("rotated logits differ by %g (max |logit| %g)", diff, scale)
	}
}
