package eval

import (
	"math"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// FuzzPerplexity drives Perplexity with arbitrary token streams (bytes as
// ids, some outside the fake's 200-id vocabulary), context sizes, strides
// and limits, including overflowing ones. It must never panic; on success
// the result must be a perplexity >= 1 over at least one scored token.
func FuzzPerplexity(f *testing.F) {
	// A real text's bytes as a seed, truncated to keep the corpus small.
	text := testutil.ReadFile(f, "text/TinyStories-valid-excerpt.txt")
	f.Add(text[:min(len(text), 600)], 64, 0, 0, uint8(0))
	f.Add(text[:min(len(text), 300)], 32, 8, 3, uint8(1))
	f.Add([]byte{1, 2, 3, 4, 5, 6}, 3, 0, 0, uint8(0))
	f.Add([]byte{1}, 2, 1, 0, uint8(1))
	f.Add([]byte{}, 0, 0, 0, uint8(2))
	f.Add([]byte{250, 251, 252, 253, 254, 255, 1, 2}, 4, 0, 0, uint8(0))
	f.Add([]byte{1, 2, 3}, math.MaxInt, math.MaxInt, 0, uint8(1))
	f.Add([]byte{1, 2, 3}, math.MinInt, -1, -1, uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, ctx, stride, maxChunks int, method uint8) {
		tokens := make([]int, len(data))
		for i, b := range data {
			tokens[i] = int(b)
		}
		o := Options{Ctx: ctx, Stride: stride, MaxChunks: maxChunks, BOS: 1}
		o.Method = []Method{"", LlamaCpp, Sliding, "other"}[method%4]
		s := &peakSession{V: 200, next: func(x int) int { return (x*7 + 1) % 200 }, w: func(x int) float64 { return float64(x%13) - 6 }}
		r, err := Perplexity(s, tokens, o)
		if err != nil {
			return
		}
		if r.Tokens < 1 || !(r.PPL >= 1-1e-12) || math.IsInf(r.PPL, 0) || r.Chunks < 1 {
			t.Fatalf("result %+v for %d tokens %+v", r, len(tokens), o)
		}
	})
}
