package op

import (
	"fmt"
	"math"
)

// The gated_delta op of a Gated DeltaNet layer (Qwen3.5's linear
// attention, which runs its q, k, v through causal_conv, causalconv.go
// first), carrying a state from one call to the next:
//
//	gated_delta  the gated delta rule over x = [q | k | v] (after the
//	             convolution), a and b [T, Hv], weights A [Hv] (the log
//	             decay rate, -exp(A_log)) and dt_bias [Hv]; see
//	             GatedDeltaRows

// DeltaDims are the head sizes of a gated_delta op: KeyHeads heads of
// KeyDim for q and k, ValueHeads heads of ValueDim for v and the output.
// Value head j reads key head j % KeyHeads (the value heads of one key
// head are tiled, not grouped).
type DeltaDims struct {
	KeyHeads   int `json:"key_heads"`
	ValueHeads int `json:"value_heads"`
	KeyDim     int `json:"key_dim"`
	ValueDim   int `json:"value_dim"`
}

// In is the width of x, [q | k | v].
func (d DeltaDims) In() int { return 2*d.KeyHeads*d.KeyDim + d.ValueHeads*d.ValueDim }

// Out is the width of the output, ValueHeads * ValueDim.
func (d DeltaDims) Out() int { return d.ValueHeads * d.ValueDim }

// State is the size of the state: a [KeyDim, ValueDim] matrix per value
// head.
func (d DeltaDims) State() int { return d.ValueHeads * d.KeyDim * d.ValueDim }

// Temp is the scratch GatedDeltaRows needs.
func (d DeltaDims) Temp() int { return 2*d.KeyHeads*d.KeyDim + 2*d.ValueDim }

// Check reports sizes no gated_delta op can have.
func (d DeltaDims) Check() error {
	for _, v := range []int{d.KeyHeads, d.ValueHeads, d.KeyDim, d.ValueDim} {
		if v < 1 || v > 1<<16 {
			return fmt.Errorf("gated delta heads %+v out of range", d)
		}
	}
	if d.ValueHeads%d.KeyHeads != 0 {
		return fmt.Errorf("gated delta: %d value heads are not a multiple of %d key heads", d.ValueHeads, d.KeyHeads)
	}
	return nil
}

// L2NormEps is the epsilon of the L2 normalization of q and k:
// x / sqrt(sum x^2 + eps).
const L2NormEps = 1e-6

// DeltaHead returns the key head value head j reads.
func (d DeltaDims) DeltaHead(j int) int { return j % d.KeyHeads }

// GatedDeltaRows runs the gated delta rule over T rows in order. x is
// [T, In] with rows [q | k | v] (KeyHeads*KeyDim, KeyHeads*KeyDim,
// ValueHeads*ValueDim), a and b are [T, ValueHeads], A and dtBias
// [ValueHeads], Sin the [ValueHeads][KeyDim][ValueDim] state before the
// rows (zero at the start of a sequence) and Sout the state after them
// (which may be Sin), out [T, Out]. Per row, q and k are L2-normalized
// per head and q scaled by 1/sqrt(KeyDim); per value head j, reading key
// head j % KeyHeads:
//
//	beta = sigmoid(b_j),  g = A_j * Softplus(a_j + dt_bias_j)
//	S    = exp(g) * S
//	S   += k (x) (beta * (v - S^T k))
//	o    = S^T q
//
// tmp holds at least d.Temp() floats.
func GatedDeltaRows(out, x, a, b, A, dtBias, Sin, Sout []float32, T int, d DeltaDims, tmp []float32) {
	Hk, Hv, Dk, Dv := d.KeyHeads, d.ValueHeads, d.KeyDim, d.ValueDim
	in, nk := d.In(), Hk*Dk
	qn, kn, mem, o := tmp[:nk], tmp[nk:2*nk], tmp[2*nk:2*nk+Dv], tmp[2*nk+Dv:2*nk+2*Dv]
	for t := 0; t < T; t++ {
		row := x[t*in : (t+1)*in]
		d.NormalizeQK(qn, kn, row)
		for j := 0; j < Hv; j++ {
			kh := d.DeltaHead(j)
			q, k := qn[kh*Dk:(kh+1)*Dk], kn[kh*Dk:(kh+1)*Dk]
			v := row[2*nk+j*Dv : 2*nk+(j+1)*Dv]
			decay, beta := DeltaGates(a[t*Hv+j], b[t*Hv+j], A[j], dtBias[j])
			h := j * Dk * Dv
			deltaStep(Sin[h:h+Dk*Dv], Sout[h:h+Dk*Dv], q, k, v, decay, beta, Dv, mem, o)
			copy(out[t*Hv*Dv+j*Dv:], o)
		}
		Sin = Sout // the next rows continue from the state written
	}
	if T == 0 {
		copy(Sout, Sin)
	}
}

// NormalizeQK sets qn and kn [KeyHeads*KeyDim] to the q and k of row (a
// row of x), L2-normalized per head, q also scaled by 1/sqrt(KeyDim).
func (d DeltaDims) NormalizeQK(qn, kn, row []float32) {
	Dk, nk := d.KeyDim, d.KeyHeads*d.KeyDim
	scale := 1 / math.Sqrt(float64(Dk))
	for h := 0; h < d.KeyHeads; h++ {
		l2Normalize(qn[h*Dk:(h+1)*Dk], row[h*Dk:(h+1)*Dk], scale)
		l2Normalize(kn[h*Dk:(h+1)*Dk], row[nk+h*Dk:nk+(h+1)*Dk], 1)
	}
}

// DeltaLogDecay returns g = A * Softplus(a + dtBias), the log of one value
// head's decay for one row.
func DeltaLogDecay(a, A, dtBias float32) float64 {
	return float64(A) * Softplus(float64(a)+float64(dtBias))
}

// DeltaGates returns exp(g) and beta of one value head and row.
func DeltaGates(a, b, A, dtBias float32) (decay, beta float32) {
	return float32(math.Exp(DeltaLogDecay(a, A, dtBias))), SigmoidOf(b)
}

// deltaStep advances one head's state Sin [Dk][Dv] by one row into Sout
// (which may be Sin) and sets o.
func deltaStep(Sin, Sout, q, k, v []float32, decay, beta float32, Dv int, mem, o []float32) {
	clear(mem)
	for i, ki := range k {
		r, w := Sin[i*Dv:(i+1)*Dv], Sout[i*Dv:(i+1)*Dv]
		for c := range w {
			w[c] = r[c] * decay
			mem[c] += w[c] * ki
		}
	}
	for c := range mem {
		mem[c] = (v[c] - mem[c]) * beta
	}
	clear(o)
	for i, ki := range k {
		r := Sout[i*Dv : (i+1)*Dv]
		qi := q[i]
		for c := range r {
			r[c] += ki * mem[c]
			o[c] += r[c] * qi
		}
	}
}

// l2Normalize sets dst = src / sqrt(sum src^2 + L2NormEps) * scale.
func l2Normalize(dst, src []float32, scale float64) {
	var ss float64
	for _, v := range src {
		ss += float64(v) * float64(v)
	}
	f := float32(scale / math.Sqrt(ss+L2NormEps))
	for i, v := range src {
		dst[i] = v * f
	}
}
