package engine

import (
	"math"

	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/op"
)

// The Gated DeltaNet steps (op/deltanet.go), run over a pass's valid rows
// with the session's state slots. A pass of one row takes the delta rule's
// one-row form; a longer pass the chunked form (deltaChunked), which
// reads the state once per chunk instead of once a row.

// deltaTemp is the scratch a gated_delta step's one-row form needs.
func deltaTemp(d *op.DeltaDims) int { return d.Temp() }

// deltaChunk is the most rows the chunked form solves at once: its cost
// grows with the square of the rows.
const deltaChunk = 64

// deltaScratch is the chunked form's scratch, grown on first use.
type deltaScratch struct {
	f []float32
	g []float64 // cumulative log decays
}

// runDeltaNet runs a causal_conv or gated_delta step.
func (r *recState) runDeltaNet(st *step, out []float32, in [][]float32, rows, cols int) {
	switch st.Op {
	case op.CausalConv:
		op.CausalConvRows(out, in[0], st.ws[0], r.prev[st.Slot], r.slots[st.Slot], rows, cols, st.HeadDim)
	case op.GatedDelta:
		if rows == 1 {
			deltaRow(out, in[0], in[1], in[2], st.ws[0], st.ws[1], r.prev[st.Slot], r.slots[st.Slot], *st.Delta, r.tmp)
			return
		}
		deltaChunked(out, in[0], in[1], in[2], st.ws[0], st.ws[1], r.prev[st.Slot], r.slots[st.Slot], rows, *st.Delta, &r.delta)
	}
}

// deltaRow is op.GatedDeltaRows for one row with the SIMD vector kernels
// (the decode step), reading the state from Sin and writing it to Sout.
func deltaRow(out, x, a, b, A, dtBias, Sin, Sout []float32, d op.DeltaDims, tmp []float32) {
	Dk, Dv, nk := d.KeyDim, d.ValueDim, d.KeyHeads*d.KeyDim
	qn, kn, mem := tmp[:nk], tmp[nk:2*nk], tmp[2*nk:2*nk+Dv]
	d.NormalizeQK(qn, kn, x)
	for j := 0; j < d.ValueHeads; j++ {
		kh := d.DeltaHead(j)
		q, k := qn[kh*Dk:(kh+1)*Dk], kn[kh*Dk:(kh+1)*Dk]
		v := x[2*nk+j*Dv : 2*nk+(j+1)*Dv]
		decay, beta := op.DeltaGates(a[j], b[j], A[j], dtBias[j])
		si, so := Sin[j*Dk*Dv:(j+1)*Dk*Dv], Sout[j*Dk*Dv:(j+1)*Dk*Dv]
		clear(mem)
		for i, ki := range k {
			r := so[i*Dv : (i+1)*Dv]
			kernel.Scale(r, si[i*Dv:(i+1)*Dv], decay)
			kernel.Axpy(mem, ki, r)
		}
		for c := range mem {
			mem[c] = (v[c] - mem[c]) * beta
		}
		o := out[j*Dv : (j+1)*Dv]
		clear(o)
		for i, ki := range k {
			r := so[i*Dv : (i+1)*Dv]
			kernel.Axpy(r, ki, mem)
			kernel.Axpy(o, q[i], r)
		}
	}
}

// deltaChunked is op.GatedDeltaRows over chunks of up to deltaChunk rows.
// Within a chunk of n rows, with S0 the state before it, G_t the summed
// log decays of rows 0..t and k, q normalized, the rows' updates u_t (S_t
// = exp(g_t) S_{t-1} + k_t u_t^T) solve the triangular system
//
//	u_t = beta_t (v_t - exp(G_t) S0^T k_t - sum_{s<t} exp(G_t - G_s) (k_s.k_t) u_s)
//
// and then o_t = exp(G_t) S0^T q_t + sum_{s<=t} exp(G_t - G_s) (k_s.q_t) u_s,
// S_n = exp(G_n) S0 + sum_s exp(G_n - G_s) k_s u_s^T: the same values as
// the row-by-row recurrence, summed in another order.
func deltaChunked(out, x, a, b, A, dtBias, Sin, Sout []float32, T int, d op.DeltaDims, sc *deltaScratch) {
	nk, Dv := d.KeyHeads*d.KeyDim, d.ValueDim
	n := min(T, deltaChunk)
	if need := 2*n*nk + n*Dv + Dv + n; len(sc.f) < need {
		sc.f = make([]float32, need)
		sc.g = make([]float64, deltaChunk)
	}
	for lo := 0; lo < T; lo += deltaChunk {
		n := min(deltaChunk, T-lo)
		deltaChunkRows(out, x, a, b, A, dtBias, Sin, Sout, lo, n, d, sc)
		Sin = Sout // the next chunk continues from the state written
	}
}

// deltaChunkRows runs the rows lo..lo+n-1 as one chunk from the state
// Sin, writing the state after them to Sout (which may be Sin).
func deltaChunkRows(out, x, a, b, A, dtBias, Sin, Sout []float32, lo, n int, d op.DeltaDims, sc *deltaScratch) {
	Hv, Dk, Dv := d.ValueHeads, d.KeyDim, d.ValueDim
	in, nk := d.In(), d.KeyHeads*d.KeyDim
	f := sc.f
	qn, kn, f := f[:n*nk], f[n*nk:2*n*nk], f[2*n*nk:]
	U, mem, beta := f[:n*Dv], f[n*Dv:n*Dv+Dv], f[n*Dv+Dv:n*Dv+Dv+n]
	G := sc.g[:n]
	for t := 0; t < n; t++ {
		d.NormalizeQK(qn[t*nk:(t+1)*nk], kn[t*nk:(t+1)*nk], x[(lo+t)*in:(lo+t+1)*in])
	}
	for j := 0; j < Hv; j++ {
		kh := d.DeltaHead(j)
		Sj, Oj := Sin[j*Dk*Dv:(j+1)*Dk*Dv], Sout[j*Dk*Dv:(j+1)*Dk*Dv]
		acc := 0.0
		for t := 0; t < n; t++ {
			r := (lo + t) * Hv
			acc += op.DeltaLogDecay(a[r+j], A[j], dtBias[j])
			G[t], beta[t] = acc, op.SigmoidOf(b[r+j])
		}
		key := func(t int) []float32 { return kn[t*nk+kh*Dk : t*nk+(kh+1)*Dk] }
		for t := 0; t < n; t++ {
			kt, qt := key(t), qn[t*nk+kh*Dk:t*nk+(kh+1)*Dk]
			et := float32(math.Exp(G[t]))
			u := U[t*Dv : (t+1)*Dv]
			v := x[(lo+t)*in+2*nk+j*Dv : (lo+t)*in+2*nk+(j+1)*Dv]
			stateTimes(mem, Sj, kt, Dv)
			for c := range u {
				u[c] = v[c] - et*mem[c]
			}
			for s := 0; s < t; s++ {
				w := float32(math.Exp(G[t]-G[s])) * kernel.Dot(kt, key(s))
				kernel.Axpy(u, -w, U[s*Dv:(s+1)*Dv])
			}
			for c := range u {
				u[c] *= beta[t]
			}
			o := out[(lo+t)*Hv*Dv+j*Dv : (lo+t)*Hv*Dv+(j+1)*Dv]
			stateTimes(mem, Sj, qt, Dv)
			for c := range o {
				o[c] = et * mem[c]
			}
			for s := 0; s <= t; s++ {
				w := float32(math.Exp(G[t]-G[s])) * kernel.Dot(qt, key(s))
				kernel.Axpy(o, w, U[s*Dv:(s+1)*Dv])
			}
		}
		eN := float32(math.Exp(G[n-1]))
		for i, v := range Sj {
			Oj[i] = v * eN
		}
		for s := 0; s < n; s++ {
			w := float32(math.Exp(G[n-1] - G[s]))
			ks, us := key(s), U[s*Dv:(s+1)*Dv]
			for i, ki := range ks {
				kernel.Axpy(Oj[i*Dv:(i+1)*Dv], w*ki, us)
			}
		}
	}
}

// stateTimes sets m [Dv] = S^T v for S [len(v)][Dv].
func stateTimes(m, S, v []float32, Dv int) {
	clear(m)
	for i, vi := range v {
		kernel.Axpy(m, vi, S[i*Dv:(i+1)*Dv])
	}
}
