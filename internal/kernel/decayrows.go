package kernel

import "fmt"

// DecayRows is the second half of a gated delta rule step on one value
// head's state, fused into one pass over the rows: for each row r <
// len(k) of n = len(m) elements,
//
//	s = decay*x[r*n:(r+1)*n] + k[r]*m
//	dst[r*n:(r+1)*n] = s
//	o += q[r]*s
//
// x is the state before the step and dst the state after it (dst may be
// x, but must not otherwise overlap it), o [n] accumulates the state's
// product with q. Into a dst other than x, 64-byte aligned, with len(m)
// a multiple of 16, the amd64 forms store whole lines past the caches
// (the new state of a decode step, read again only a token later, after
// the weights have streamed through the caches). next, when it holds as
// many rows, is the state the
// next call reads: the rows' cache lines are asked for as x's are read (a
// hint; nil asks for nothing). Slices too short for len(k) rows of
// len(m) elements panic before anything is written.
func DecayRows(dst, x, o, m, k, q []float32, decay float32, next []float32) {
	rows, n := len(k), len(m)
	if len(q) < rows || len(o) < n || len(x) < rows*n || len(dst) < rows*n {
		panic(fmt.Sprintf("kernel: DecayRows: %d rows of %d elements with x %d, dst %d, o %d, q %d", rows, n, len(x), len(dst), len(o), len(q)))
	}
	if rows == 0 || n == 0 {
		return
	}
	if len(next) < rows*n {
		next = x // lines already near: asking for them costs little
	}
	decayRowsImpl(dst[:rows*n], x[:rows*n], o[:n], m, k, q[:rows], decay, next)
}

// decayRowsGeneric is DecayRows' plain reference.
func decayRowsGeneric(dst, x, o, m, k, q []float32, decay float32, _ []float32) {
	decayRowsCols(dst, x, o, m, k, q, decay, 0, len(m))
}

// decayRowsCols runs DecayRows' rule on columns c0..len(m)-1 of rows of
// stride elements (the assembly forms leave it their last columns).
func decayRowsCols(dst, x, o, m, k, q []float32, decay float32, c0, stride int) {
	for r, kr := range k {
		qr := q[r]
		xs, ds := x[r*stride:(r+1)*stride], dst[r*stride:(r+1)*stride]
		for c := c0; c < len(m); c++ {
			s := decay*xs[c] + kr*m[c]
			ds[c] = s
			o[c] += qr * s
		}
	}
}
