package engine

import (
	"math"

	"github.com/aotlm/aotlm/internal/kernel"
)

// kvZero is the stored byte of the value 0 in a uint8 cache: the bias the
// kernel package's uint8 row kernels remove.
const kvZero = kernel.U8Bias

// quantizeKV stores x with scale s: clamp(round_half_even(x/s), -127, 127)
// + 128; NaN and a zero scale store 128.
func quantizeKV(x, s float32) uint8 {
	if s == 0 {
		return kvZero
	}
	r := math.RoundToEven(float64(x / s))
	switch {
	case r != r:
		r = 0
	case r < -127:
		r = -127
	case r > 127:
		r = 127
	}
	return uint8(int(r) + kvZero)
}

// headScale returns the scale of head g from one per layer or one per head.
func headScale(sc []float32, g int) float32 {
	if len(sc) == 1 {
		return sc[0]
	}
	return sc[g]
}

// first returns the first cache slot row t may see: the window's start
// (a position, which is a committed slot's index), no later than the
// pass's first slot when the pass is not a chain (its rows' slots are
// masked one by one).
func (a *attnArgs) first(t int) int {
	p := a.rowPos0(t)
	lo := 0
	if a.window > 0 && p-a.window+1 > 0 {
		lo = p - a.window + 1
	}
	if a.rowPos != nil {
		lo = min(lo, a.pos)
	}
	return lo
}

// rowPos0 returns the position of row t.
func (a *attnArgs) rowPos0(t int) int {
	if a.rowPos != nil {
		return a.rowPos[t]
	}
	return a.pos + t
}

// hidden reports whether row t may not see pass row j (slot pos+j): the
// mask forbids it, or its position is outside the row's window.
func (a *attnArgs) hidden(t, j int) bool {
	if !a.mask.Allowed(t, j) {
		return true
	}
	return a.window > 0 && a.rowPos[j] <= a.rowPos[t]-a.window
}
