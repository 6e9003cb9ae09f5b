package arch

import (
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/graph"
)

// ropeFreqs returns the R/2 angular frequencies of the config, with its
// scaling applied: base theta^(-2i/R), then linear division, Llama 3's
// wavelength-dependent smoothing, YaRN's ramp between the base and the
// divided frequencies, longrope's per-pair short or long factors, or
// GGUF's per-pair factors.
func ropeFreqs(c *Config) ([]float64, error) {
	r := c.rotDim()
	f := make([]float64, r/2)
	for i := range f {
		// computed as llama2.c does: 1 / theta^(2i/R)
		f[i] = 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(r))
	}
	s := c.RopeScaling
	switch s.Type {
	case "", "default":
	case "linear":
		if s.Factor <= 0 {
			return nil, fmt.Errorf("rope_scaling linear: factor %v must be positive", s.Factor)
		}
		for i := range f {
			f[i] /= s.Factor
		}
	case "llama3":
		if s.Factor <= 0 || s.LowFreqFactor <= 0 || s.HighFreqFactor <= s.LowFreqFactor || s.OriginalMaxPosition <= 0 {
			return nil, fmt.Errorf("rope_scaling llama3: factor %v, low %v, high %v, original %d are not usable",
				s.Factor, s.LowFreqFactor, s.HighFreqFactor, s.OriginalMaxPosition)
		}
		old := float64(s.OriginalMaxPosition)
		lowWave, highWave := old/s.LowFreqFactor, old/s.HighFreqFactor
		for i, v := range f {
			wave := 2 * math.Pi / v
			switch {
			case wave < highWave: // high frequency: unchanged
			case wave > lowWave: // low frequency: divided
				f[i] = v / s.Factor
			default:
				smooth := (old/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
				f[i] = (1-smooth)*v/s.Factor + smooth*v
			}
		}
	case "dynamic":
		base, err := dynamicBase(c)
		if err != nil {
			return nil, err
		}
		for i := range f {
			f[i] = 1 / math.Pow(base, float64(2*i)/float64(r))
		}
	case "yarn":
		if err := c.checkYarn(); err != nil {
			return nil, err
		}
		yarnFreqs(c, f)
	case "longrope":
		if err := c.checkLongRope(); err != nil {
			return nil, err
		}
		ext := s.ShortFactor
		if c.LongRopeFactors() {
			ext = s.LongFactor
		}
		for i, k := range ext {
			f[i] /= k
		}
	default:
		return nil, fmt.Errorf("rope_scaling type %q is not supported", s.Type)
	}
	for i, k := range c.RopeFreqFactors {
		if !(k > 0) {
			return nil, fmt.Errorf("rope frequency factor %d is %v", i, k)
		}
		f[i] /= float64(k)
	}
	return f, nil
}

// RopeFreqsAt returns the rotary frequencies of the config's rotary
// embedding, its scaling applied, for a graph built for n positions
// (RopeContext n; it matters to longrope and dynamic scaling only).
func (c *Config) RopeFreqsAt(n int) ([]float64, error) {
	at := *c
	at.RopeContext = n
	return ropeFreqs(&at)
}

// dynamicBase is the RoPE base of dynamic NTK scaling for a graph built
// for n positions (RopeContext, else Context): theta while n is within the
// original context o (OriginalMaxPosition, else Context), and beyond it
// theta * (factor*n/o - (factor-1))^(R/(R-2)). Hugging Face recomputes the
// base every forward pass from the sequence length so far; here it is
// fixed once for the compiled context, so the two agree exactly within
// the original context and for a sequence that fills the compiled one.
func dynamicBase(c *Config) (float64, error) {
	s := c.RopeScaling
	if !(s.Factor >= 1) {
		return 0, fmt.Errorf("rope_scaling dynamic: factor %v must be at least 1", s.Factor)
	}
	o := s.OriginalMaxPosition
	if o <= 0 {
		o = c.Context
	}
	n := c.RopeContext
	if n <= 0 {
		n = c.Context
	}
	r := float64(c.rotDim())
	if n <= o || r <= 2 {
		return c.RopeTheta, nil
	}
	return c.RopeTheta * math.Pow(s.Factor*float64(n)/float64(o)-(s.Factor-1), r/(r-2)), nil
}

func ropeOf(c *Config) (graph.Rope, error) {
	f, err := ropeFreqs(c)
	if err != nil {
		return graph.Rope{}, err
	}
	r := graph.Rope{Style: c.RopeStyle, HeadDim: c.HeadDim, RotDim: c.rotDim(), InvFreq: f,
		Sections: append([]int(nil), c.RopeSections...)}
	switch c.RopeScaling.Type {
	case "longrope":
		if m := ropeMagnitude(c); m != 1 {
			r.Scale = m
		}
	case "yarn":
		if m := yarnMagnitude(c); m != 1 {
			r.Scale = m
		}
	}
	return r, nil
}

// ropeMagnitude is longrope's attention factor, which multiplies cos and
// sin: AttentionFactor when set; else, with s = Factor (or, when 0,
// Context / OriginalMaxPosition, Phi-3's max_position_embeddings over
// original_max_position_embeddings) and o = OriginalMaxPosition,
// sqrt(1 + ln(s)/ln(o)) when s > 1 and 1 otherwise.
func ropeMagnitude(c *Config) float64 {
	s := c.RopeScaling
	if s.AttentionFactor > 0 {
		return s.AttentionFactor
	}
	o := float64(s.OriginalMaxPosition)
	f := s.Factor
	if f == 0 {
		f = float64(c.Context) / o
	}
	if f <= 1 || o <= 1 {
		return 1
	}
	return math.Sqrt(1 + math.Log(f)/math.Log(o))
}

// checkLongRope validates a longrope scaling; errors name the config.json
// field.
func (c *Config) checkLongRope() error {
	s, half := &c.RopeScaling, c.rotDim()/2
	if s.OriginalMaxPosition <= 0 || s.OriginalMaxPosition > 1<<24 {
		return fmt.Errorf("rope_scaling.original_max_position_embeddings: %d must be positive", s.OriginalMaxPosition)
	}
	for _, l := range []struct {
		name string
		v    []float64
	}{{"short_factor", s.ShortFactor}, {"long_factor", s.LongFactor}} {
		if len(l.v) != half {
			return fmt.Errorf("rope_scaling.%s: %d values for rotary size %d, want %d", l.name, len(l.v), 2*half, half)
		}
		for i, k := range l.v {
			if !(k > 0) || math.IsInf(k, 0) {
				return fmt.Errorf("rope_scaling.%s[%d]: %v must be positive and finite", l.name, i, k)
			}
		}
	}
	for _, m := range []struct {
		name string
		v    float64
	}{{"factor", s.Factor}, {"attention_factor", s.AttentionFactor}} {
		if m.v < 0 || math.IsNaN(m.v) || math.IsInf(m.v, 0) || m.v > 1e6 {
			return fmt.Errorf("rope_scaling.%s: %v must be positive and finite", m.name, m.v)
		}
	}
	return nil
}

// yarnOriginal is YaRN's original context: OriginalMaxPosition, else
// the trained context.
func yarnOriginal(c *Config) int {
	if o := c.RopeScaling.OriginalMaxPosition; o > 0 {
		return o
	}
	return c.Context
}

// yarnFreqs applies YaRN (Peng et al. 2023, as Hugging Face computes it)
// to the base frequencies f in place. With d the rotary size, b theta and
// o the original context, pair i's correction dimension for r rotations
// over o positions is d*ln(o/(2*pi*r)) / (2*ln(b)); lo is that of
// BetaFast rotations (floored), hi that of BetaSlow (ceiled, unless
// NoTruncate), clamped to [0, d-1]. A ramp rises from 0 at pair lo to 1
// at pair hi (hi nudged by 0.001 when equal); pairs below the ramp keep
// their frequency (fast rotations extrapolate), pairs above it are
// divided by the factor (slow ones interpolate), and in between the two
// mix: f*(1-ramp) + f/factor*ramp.
func yarnFreqs(c *Config, f []float64) {
	s := c.RopeScaling
	d, b, o := float64(c.rotDim()), c.RopeTheta, float64(yarnOriginal(c))
	dim := func(rot float64) float64 { return d * math.Log(o/(rot*2*math.Pi)) / (2 * math.Log(b)) }
	fast, slow := s.BetaFast, s.BetaSlow
	if fast == 0 {
		fast = 32
	}
	if slow == 0 {
		slow = 1
	}
	lo, hi := dim(fast), dim(slow)
	if !s.NoTruncate {
		lo, hi = math.Floor(lo), math.Ceil(hi)
	}
	lo, hi = max(lo, 0), min(hi, d-1)
	if lo == hi {
		hi += 0.001
	}
	for i, v := range f {
		ramp := min(max((float64(i)-lo)/(hi-lo), 0), 1)
		f[i] = v*(1-ramp) + v/s.Factor*ramp
	}
}

// yarnMagnitude is YaRN's attention factor, which multiplies cos and sin:
// AttentionFactor when set; else with m(x) = 0.1*x*ln(factor) + 1 (1 for
// a factor up to 1), m(Mscale)/m(MscaleAllDim) when both are set, and
// m(1) otherwise.
func yarnMagnitude(c *Config) float64 {
	s := c.RopeScaling
	if s.AttentionFactor > 0 {
		return s.AttentionFactor
	}
	m := func(x float64) float64 {
		if s.Factor <= 1 {
			return 1
		}
		return 0.1*x*math.Log(s.Factor) + 1
	}
	if s.Mscale != 0 && s.MscaleAllDim != 0 {
		return m(s.Mscale) / m(s.MscaleAllDim)
	}
	return m(1)
}

// checkYarn validates a YaRN scaling; errors name the config.json field.
func (c *Config) checkYarn() error {
	s := c.RopeScaling
	for _, v := range []struct {
		name string
		v    float64
		min  float64
	}{{"factor", s.Factor, 1e-6}, {"beta_fast", s.BetaFast, 0}, {"beta_slow", s.BetaSlow, 0},
		{"attention_factor", s.AttentionFactor, 0}, {"mscale", s.Mscale, 0}, {"mscale_all_dim", s.MscaleAllDim, 0}} {
		if math.IsNaN(v.v) || math.IsInf(v.v, 0) || v.v < v.min || v.v > 1e6 {
			return fmt.Errorf("rope_scaling.%s: %v is not a usable yarn value", v.name, v.v)
		}
	}
	if o := yarnOriginal(c); s.OriginalMaxPosition < 0 || o <= 0 || o > 1<<24 {
		return fmt.Errorf("rope_scaling.original_max_position_embeddings: %d must be positive", o)
	}
	if c.RopeTheta <= 1 {
		return fmt.Errorf("rope_scaling yarn: rope theta %v must exceed 1", c.RopeTheta)
	}
	return nil
}
