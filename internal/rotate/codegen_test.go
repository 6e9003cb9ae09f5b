package rotate

import (
	"math"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestCodegenRotations: on the codegen2 fixture the online R3 rotation
// (q and k after RoPE) leaves the logits within 1e-4 of the largest; R4 is
// refused because fc_out has a bias, and R1 because the residual stream
// goes through LayerNorms.
func TestCodegenRotations(t *testing.T) {
	path := testutil.Path(t, "arch/codegen2")
	m := load(t, path)
	ids := []int{1, 5, 9, 2, 7, 3, 8, 4, 6, 10, 11, 3}
	want := logits(t, m, ids)
	rep, err := Apply(m, Options{R3: quant.RotationHadamard})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Config.RotateQK || rep.R3Block != 8 {
		t.Fatalf("r3 not applied: config %+v, report %+v", m.Config, rep)
	}
	got := logits(t, m, ids)
	var scale, diff float64
	for i := range want {
		scale = max(scale, math.Abs(float64(want[i])))
		diff = max(diff, math.Abs(float64(got[i]-want[i])))
	}
	t.Logf("r3: max |logit diff| %.3g of max |logit| %.3g", diff, scale)
	if diff > 1e-4*max(scale, 1) {
		t.Errorf("r3 moves the logits by %g", diff)
	}
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{R4: quant.RotationHadamard}, "bias"},
		{Options{R1: quant.RotationHadamard}, "R1 does not apply"},
	} {
		if _, err := Apply(load(t, path), c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error naming %q", c.opts, err, c.want)
		}
	}
}
