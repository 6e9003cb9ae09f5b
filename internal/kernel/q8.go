package kernel

import (
	"math"
	"sync/atomic"
	"unsafe"
)

// QK is the block length of activation quantization and of the packed
// weights' scales.
const QK = 32

// Q8 is T rows of K activations quantized to int8 in blocks of QK, each
// block with its own scale: x[t][k] ≈ float32(Q[t*K+k]) * D[t*nb+k/QK].
type Q8 struct {
	T, K int
	Q    []int8    // [T][K]
	D    []float32 // [T][nb] block scales
	Sum  []int32   // [T][nb] sum of the block's Q

	recs records // laid out once for the products (Begin), or not in use
}

// records are a Q8's rows re-laid out for this build's 4-bit and 8-bit
// products, filled by QuantizeRows after Begin asked for them, so that
// every MatMul call on the same activations (the workers' row ranges, q,
// k and v) reads them instead of laying them out again.
type records struct {
	q4, w8         []byte
	useQ4, useW8   bool
	q4Layout       *actLayout  // the layout of q4 (the overlay's that Begin saw)
	w8Layout       *actLayout  // the layout of w8
	w8Min128       atomic.Bool // some Q is -128 (the AVX2 8-bit kernels cannot take it)
	q4Hold, w8Hold []byte      // the allocations q4 and w8 are aligned views of
}

// actLayout is one product's record layout: bytes per token for K, and
// the fill of tokens [t0, t1). The amd64 overlays set q4Layout and
// w8Layout; elsewhere they stay nil and MatMul reads Q8 directly.
type actLayout struct {
	tokenBytes func(K int) int
	fill       func(rec []byte, x *Q8, t0, t1 int)
}

var q4Layout, w8Layout *actLayout

// Begin starts quantizing T rows that QuantizeRows fills (a.T becomes T).
// With forQ4 or forW8, QuantizeRows also lays the rows out once for that
// kind of product (4-bit, 8-bit weights), for every MatMul that follows
// until the next Begin or Quantize. It may allocate the first time.
func (a *Q8) Begin(T int, forQ4, forW8 bool) {
	a.T = T
	a.recs.useQ4 = forQ4 && q4Layout != nil
	a.recs.q4Layout, a.recs.w8Layout = q4Layout, w8Layout
	a.recs.useW8 = forW8 && w8Layout != nil
	a.recs.w8Min128.Store(false)
	if a.recs.useQ4 {
		a.recs.q4 = alignedGrow(&a.recs.q4Hold, T*q4Layout.tokenBytes(a.K))
	}
	if a.recs.useW8 {
		a.recs.w8 = alignedGrow(&a.recs.w8Hold, T*w8Layout.tokenBytes(a.K))
	}
}

// QuantizeRows quantizes rows [t0, t1) of x [T][K] as Quantize does
// (after Begin), with the records Begin asked for. Calls on disjoint
// ranges may run at once.
func (a *Q8) QuantizeRows(x []float32, t0, t1 int) {
	K, nb := a.K, a.K/QK
	quantizeQ8Impl(a.Q[t0*K:t1*K], a.D[t0*nb:t1*nb], a.Sum[t0*nb:t1*nb], x[t0*K:t1*K])
	if a.recs.useQ4 {
		q4Layout.fill(a.recs.q4, a, t0, t1)
	}
	if a.recs.useW8 {
		w8Layout.fill(a.recs.w8, a, t0, t1)
	}
}

// alignedGrow returns a 64-byte aligned view of n bytes of *hold, growing
// it when too small.
func alignedGrow(hold *[]byte, n int) []byte {
	if cap(*hold) < n+64 {
		*hold = make([]byte, n+64)
	}
	b := (*hold)[:n+64]
	off := int(-uintptr(unsafe.Pointer(&b[0])) & 63)
	return b[off : off+n]
}

// NewQ8 allocates room for T rows of K activations (K a multiple of QK).
func NewQ8(T, K int) *Q8 {
	nb := K / QK
	return &Q8{T: T, K: K, Q: make([]int8, T*K), D: make([]float32, T*nb), Sum: make([]int32, T*nb)}
}

// Quantize sets a's first T rows from x [T][K]:
//
//	for each block: amax = max|x|; D = amax/127;
//	Q = round_half_even(x * (127/amax)) (0 when amax is 0); Sum = ΣQ
//
// T may be less than the capacity; a.T becomes T.
func (a *Q8) Quantize(x []float32, T int) {
	a.Begin(T, false, false)
	a.QuantizeRows(x, 0, T)
}

// quantizeQ8Generic is the reference of Q8.Quantize over whole blocks.
func quantizeQ8Generic(q []int8, d []float32, sum []int32, x []float32) {
	for b := range d {
		xb := x[b*QK : (b+1)*QK]
		qb := q[b*QK : (b+1)*QK]
		var amax float32
		for _, v := range xb {
			amax = max(amax, abs32(v))
		}
		d[b] = amax / 127
		if amax == 0 {
			clear(qb)
			sum[b] = 0
			continue
		}
		id := 127 / amax
		var s int32
		for i, v := range xb {
			r := int8(math.RoundToEven(float64(v * id)))
			qb[i] = r
			s += int32(r)
		}
		sum[b] = s
	}
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }
