package plan

import (
	"math"
	"slices"
)

// Extend lets sessions hold more positions than the manifest's Ctx
// without compiling again: nothing a plan fixes depends on the context
// (the cache is sized when a session is made, rotary angles are computed
// from positions), except the rotary frequencies of scalings that pick
// them by the context, which Rope recomputes.
type Extend struct {
	// Max is the most positions a session may hold: the model's trained
	// context (times its rope scaling factor where the config says so).
	Max int `json:"max"`
	// Rope, when set, says how the rotary frequencies change with the
	// context.
	Rope *RopeRule `json:"rope,omitempty"`
}

// RopeRule gives the rotary frequencies of a context for a scaling that
// picks them by the context: longrope (Short up to Original positions,
// Long beyond) or dynamic NTK (a base of Theta up to Original positions,
// Theta * (Factor*n/Original - (Factor-1))^(R/(R-2)) for n beyond, R being
// RotDim). It applies to the rope steps whose frequencies equal From, the
// frequencies compiled for the manifest's Ctx.
type RopeRule struct {
	From     []float64 `json:"from"`
	Original int       `json:"original"`
	// longrope
	Short []float64 `json:"short,omitempty"`
	Long  []float64 `json:"long,omitempty"`
	// dynamic NTK
	Theta  float64 `json:"theta,omitempty"`
	Factor float64 `json:"factor,omitempty"`
	RotDim int     `json:"rot_dim,omitempty"`
}

// DynamicBase is dynamic NTK scaling's rotary base for n positions: theta
// while n is within the original context o, and beyond it
// theta * (factor*n/o - (factor-1))^(r/(r-2)) for a rotary size r.
func DynamicBase(theta, factor float64, o, r, n int) float64 {
	if n <= o || r <= 2 {
		return theta
	}
	return theta * math.Pow(factor*float64(n)/float64(o)-(factor-1), float64(r)/float64(r-2))
}

// Freqs returns the frequencies of the rule's steps for sessions of n
// positions, when the compiled context is ctx.
func (r *RopeRule) Freqs(ctx, n int) []float64 {
	if r.Long != nil {
		if n > r.Original {
			return slices.Clone(r.Long)
		}
		return slices.Clone(r.Short)
	}
	// From holds theta_ctx^(-2i/R) over any per-pair divisors; the base of
	// n replaces that of ctx
	from := DynamicBase(r.Theta, r.Factor, r.Original, r.RotDim, ctx)
	to := DynamicBase(r.Theta, r.Factor, r.Original, r.RotDim, n)
	f := make([]float64, len(r.From))
	for i, v := range r.From {
		f[i] = v * math.Pow(from/to, float64(2*i)/float64(r.RotDim))
	}
	return f
}

// validate checks the extension against the compiled context ctx.
func (x *Extend) validate(ctx int) error {
	if x.Max < ctx || x.Max > MaxCtx {
		return errf("manifest.extend.max", "%d is outside [%d, %d]", x.Max, ctx, MaxCtx)
	}
	r := x.Rope
	if r == nil {
		return nil
	}
	good := func(name string, f []float64, n int) error {
		if len(f) != n {
			return errf("manifest.extend.rope."+name, "%d frequencies, want %d", len(f), n)
		}
		for i, v := range f {
			if !(v > 0) || math.IsInf(v, 0) {
				return errf("manifest.extend.rope."+name, "frequency %d is %v", i, v)
			}
		}
		return nil
	}
	n := len(r.From)
	if n == 0 || n > MaxCols {
		return errf("manifest.extend.rope.from", "%d frequencies", n)
	}
	if err := good("from", r.From, n); err != nil {
		return err
	}
	if r.Original < 1 || r.Original > MaxCtx {
		return errf("manifest.extend.rope.original", "%d is outside [1, %d]", r.Original, MaxCtx)
	}
	if r.Long != nil || r.Short != nil {
		if err := good("short", r.Short, n); err != nil {
			return err
		}
		return good("long", r.Long, n)
	}
	if r.RotDim != 2*n {
		return errf("manifest.extend.rope.rot_dim", "%d for %d frequencies", r.RotDim, n)
	}
	if !(r.Theta > 1) || math.IsInf(r.Theta, 0) || !(r.Factor >= 1) || r.Factor > 1e6 {
		return errf("manifest.extend.rope", "theta %v and factor %v are not a dynamic scaling", r.Theta, r.Factor)
	}
	return nil
}
