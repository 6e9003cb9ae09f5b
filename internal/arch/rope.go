package arch

import (
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/graph"
)

// ropeFreqs returns the R/2 angular frequencies of the config, with its
// scaling applied: base theta^(-2i/R), then linear division, Llama 3's
// wavelength-dependent smoothing, or GGUF's per-pair factors.
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

func ropeOf(c *Config) (graph.Rope, error) {
	f, err := ropeFreqs(c)
	if err != nil {
		return graph.Rope{}, err
	}
	return graph.Rope{Style: c.RopeStyle, HeadDim: c.HeadDim, RotDim: c.rotDim(), InvFreq: f}, nil
}
