package compile

import (
	"math"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
)

// extendConfig is a small Llama config (rotary size 16, theta 1e4,
// trained context 256) with the given scaling.
func extendConfig(s arch.RopeScaling) arch.Config {
	return arch.Config{Family: "llama", Hidden: 64, FFN: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 100, Context: 256, NormEps: 1e-5, RopeTheta: 10000, RopeScaling: s}
}

// TestExtendRopeRule checks the manifest's rule against the frequencies
// the graph builder gives for each context: for longrope (original
// context 64) and dynamic NTK (original 64, factor 4, with per-pair
// divisors), compiled for 32, 64 or 100 positions and opened for n from
// 32 to 256, the rule's frequencies equal arch's for n within 1e-12
// relative. The dynamic base is also checked against the closed form
// theta * (factor*n/o - (factor-1))^(R/(R-2)) in float64.
func TestExtendRopeRule(t *testing.T) {
	long, short := make([]float64, 8), make([]float64, 8)
	for i := range long {
		short[i], long[i] = 1+0.1*float64(i), 1+0.7*float64(i*i)
	}
	dyn := extendConfig(arch.RopeScaling{Type: "dynamic", Factor: 4, OriginalMaxPosition: 64})
	dyn.RopeFreqFactors = []float32{1, 1, 2, 1, 1, 4, 1, 8}
	for name, c := range map[string]arch.Config{
		"longrope": extendConfig(arch.RopeScaling{Type: "longrope", OriginalMaxPosition: 64, ShortFactor: short, LongFactor: long}),
		"dynamic":  dyn,
	} {
		for _, ctx := range []int{32, 64, 100} {
			c := c
			c.RopeContext = ctx
			x, err := extendOf(&c, ctx)
			if err != nil {
				t.Fatal(err)
			}
			if x.Max != c.MaxContext() || x.Rope == nil {
				t.Fatalf("%s at %d: extend %+v, want max %d and a rope rule", name, ctx, x, c.MaxContext())
			}
			for _, n := range []int{32, 64, 65, 100, 200, 256} {
				want, err := c.RopeFreqsAt(n)
				if err != nil {
					t.Fatal(err)
				}
				got := x.Rope.Freqs(ctx, n)
				for i := range want {
					if math.Abs(got[i]-want[i]) > 1e-12*want[i] {
						t.Errorf("%s compiled for %d, opened for %d: pair %d is %v, want %v", name, ctx, n, i, got[i], want[i])
					}
				}
			}
		}
	}
	for _, n := range []int{64, 65, 128, 256} {
		b, _ := dyn.RopeFreqsAt(n)
		base := 10000.0
		if n > 64 {
			base *= math.Pow(4*float64(n)/64-3, 16.0/14)
		}
		// pair 1 has no divisor: base^(-2/16)
		if want := math.Pow(base, -2.0/16); math.Abs(b[1]-want) > 1e-14*want {
			t.Errorf("dynamic at %d: pair 1 is %v, want %v", n, b[1], want)
		}
	}
}

// TestMaxContext checks the trained context each scaling gives: the
// original context times the factor for dynamic, YaRN and linear with an
// original context (when more than max_position_embeddings),
// max_position_embeddings otherwise;
// and that a context-independent scaling records no rope rule.
func TestMaxContext(t *testing.T) {
	for _, c := range []struct {
		s    arch.RopeScaling
		want int
	}{
		{arch.RopeScaling{}, 256},
		{arch.RopeScaling{Type: "linear", Factor: 2}, 256},
		{arch.RopeScaling{Type: "linear", Factor: 4, OriginalMaxPosition: 128}, 512},
		{arch.RopeScaling{Type: "linear", Factor: 0.5, OriginalMaxPosition: 256}, 256},
		{arch.RopeScaling{Type: "yarn", Factor: 4, OriginalMaxPosition: 128}, 512},
		{arch.RopeScaling{Type: "yarn", Factor: 4}, 1024},
		{arch.RopeScaling{Type: "dynamic", Factor: 2, OriginalMaxPosition: 64}, 256},
		{arch.RopeScaling{Type: "dynamic", Factor: 8, OriginalMaxPosition: 64}, 512},
		{arch.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPosition: 64}, 256},
	} {
		cfg := extendConfig(c.s)
		cfg.RopeContext = 64 // as compileModel sets it
		if got := cfg.MaxContext(); got != c.want {
			t.Errorf("%+v: max context %d, want %d", c.s, got, c.want)
		}
		x, err := extendOf(&cfg, 64)
		if err != nil {
			t.Fatal(err)
		}
		if x.Max != c.want || (x.Rope != nil) != (c.s.Type == "dynamic") {
			t.Errorf("%+v: extend %+v", c.s, x)
		}
	}
}
