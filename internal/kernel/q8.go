package kernel

import "math"

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
	a.T = T
	quantizeQ8Impl(a.Q[:T*a.K], a.D[:T*a.K/QK], a.Sum[:T*a.K/QK], x[:T*a.K])
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
