package engine

import (
	"math"

	"github.com/aotlm/aotlm/internal/kernel"
)

// unitHeadRMSNorm is headRMSNorm with no gain weight: each E-wide head of
// x is divided by its root mean square and multiplied by 1 + offset
// (Gemma 4's values).
func unitHeadRMSNorm(dst, x []float32, E int, eps, offset float32) {
	for h := 0; h*E < len(x); h++ {
		row, out := x[h*E:(h+1)*E], dst[h*E:(h+1)*E]
		ss := kernel.Dot(row, row)/float32(E) + eps
		inv := float32(1 / math.Sqrt(float64(ss)))
		kernel.Scale(out, row, inv*(1+offset))
	}
}
