package engine

import "testing"

// TestLinearParts: a one-token linear is cut into parts of at least
// minPartBytes, at least one and at most partsPerThread per thread;
// batches and one thread keep partsPerThread.
func TestLinearParts(t *testing.T) {
	for _, c := range []struct {
		bytes      int64
		T, threads int
		want       int
	}{
		{58 << 10, 1, 2, 1},               // SmolLM2's k_proj
		{2*minPartBytes - 1, 1, 2, 1},     // just under one part a thread of minPartBytes each
		{2 * minPartBytes, 1, 2, 1},       // exactly one
		{4 * minPartBytes, 1, 2, 2},       // two each
		{6*minPartBytes + 5, 1, 2, 3},     // rounds down
		{1 << 30, 1, 2, partsPerThread},   // a classifier
		{3 * minPartBytes, 1, 3, 1},       // three threads
		{9 * minPartBytes, 1, 3, 3},       //
		{58 << 10, 16, 2, partsPerThread}, // a prefill balances its arithmetic
		{58 << 10, 1, 1, partsPerThread},  // one thread: no split at all
		{0, 1, 4, 1},                      // an empty weight still gives each thread a part
	} {
		if got := linearParts(c.bytes, c.T, c.threads); got != c.want {
			t.Errorf("linearParts(%d, T=%d, threads=%d) = %d, want %d", c.bytes, c.T, c.threads, got, c.want)
		}
	}
}

// TestPartsCoverRows: for every row count and number of parts the pool
// cuts, the parts are contiguous multiples of the grain (but the last)
// that cover [0, n) once, in order.
func TestPartsCoverRows(t *testing.T) {
	p := &pool{}
	for n := 1; n <= 300; n++ {
		for _, grain := range []int{1, 16} {
			for parts := 1; parts <= 12; parts++ {
				p.n, p.grain, p.parts = n, grain, min(parts, (n+grain-1)/grain)
				at := 0
				for i := 0; i < p.parts; i++ {
					lo, hi := p.part(i)
					if lo != at || hi < lo || (hi != n && hi%grain != 0) {
						t.Fatalf("n=%d grain=%d parts=%d: part %d is [%d, %d) after %d", n, grain, p.parts, i, lo, hi, at)
					}
					at = hi
				}
				if at != n {
					t.Fatalf("n=%d grain=%d parts=%d: parts end at %d", n, grain, p.parts, at)
				}
			}
		}
	}
}
