//go:build !purego

package kernel

// dotKVQ4With runs DotKVQ4 on the generated kernel kern (groups of 32)
// for rows of 32 values or more, else in Go.
func dotKVQ4With(kern func(q *float32, src *uint8, groups int) float32, q []float32, src []uint8) float32 {
	E := len(q)
	if E < kvq4MaxGroup {
		return dotKVQ4Generic(q, src)
	}
	_ = src[KVQ4RowBytes(E)-1]
	return kern(&q[0], &src[0], E/kvq4MaxGroup)
}

// axpyKVQ4With runs AxpyKVQ4 on the generated kernel kern (groups of 32)
// for rows of 32 values or more, else in Go.
func axpyKVQ4With(kern func(y *float32, alpha float32, src *uint8, groups int), y []float32, alpha float32, src []uint8) {
	E := len(y)
	if E < kvq4MaxGroup {
		axpyKVQ4Generic(y, alpha, src)
		return
	}
	_ = src[KVQ4RowBytes(E)-1]
	kern(&y[0], alpha, &src[0], E/kvq4MaxGroup)
}
