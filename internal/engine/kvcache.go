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

// first returns the first cache position row t may see.
func (a *attnArgs) first(t int) int {
	p := a.pos + t
	if a.window > 0 && p-a.window+1 > 0 {
		return p - a.window + 1
	}
	return 0
}
