package rotate

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestQwen35Rotations: on the qwen35 fixture, R1 (the residual stream,
// which feeds the DeltaNet projections as it feeds q, k and v) and the
// online R3 (q and k of the two full-attention layers) and R4 (every
// down_proj input) keep the logits within 1e-4 of the largest; R2 is
// refused, since the output gate multiplies the attention output
// elementwise before o_proj.
func TestQwen35Rotations(t *testing.T) {
	var ref struct{ Tokens []int }
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/qwen35/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	m := load(t, testutil.Path(t, "arch/qwen35"))
	want := logits(t, m, ref.Tokens)
	if _, err := Apply(m, Options{R2: quant.RotationHadamard}); err == nil || !strings.Contains(err.Error(), "one linear") {
		t.Fatalf("r2: want a refusal naming the gated output, got %v", err)
	}
	m = load(t, testutil.Path(t, "arch/qwen35"))
	rep, err := Apply(m, Options{R1: quant.RotationRandom, R3: quant.RotationHadamard, R4: quant.RotationHadamard, Seed: 3})
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
	if full, L := len(m.Config.DeltaNet.FullLayers), m.Config.Layers; hadamards != 2*full+L || rep.Down != L || rep.Linears == 0 {
		t.Fatalf("%d hadamard steps for %d layers (%d full attention), report %+v", hadamards, L, full, rep)
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
