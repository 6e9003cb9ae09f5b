package engine

import (
	"math"

	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/op"
)

// The Gated DeltaNet steps (op/deltanet.go), run over a pass's valid rows
// with the session's state slots. The value heads of a gated_delta step
// are independent: they are split across the session's workers. A pass of
// one row takes the delta rule's one-row form; a longer pass the chunked
// form (chunkHead), which writes the state once per chunk instead of once
// a row. Both run on the SIMD vector kernels.

// deltaChunk is the most rows the chunked form solves at once: its cost
// grows with the square of the rows.
const deltaChunk = 64

// deltaTask is one gated_delta step over its value heads.
type deltaTask struct {
	out, x, a, b, A, dtBias, Sin, Sout []float32
	d                                  op.DeltaDims
	rows                               int
	qn, kn                             []float32 // every row's normalized q and k
	work                               []deltaScratch
}

// deltaScratch is one worker's scratch.
type deltaScratch struct {
	u, mem, beta []float32 // the chunk's row updates [deltaChunk][Dv], S0^T v [Dv], betas
	w, f         []float32 // a row's coefficients over the chunk's rows; each row's decay to the chunk's end
	g            []float64 // the chunk's summed log decays
}

// prepare sizes the scratch for rows rows and workers workers and
// normalizes every row's q and k.
func (t *deltaTask) prepare(rows, workers int) {
	d := t.d
	nk := d.KeyHeads * d.KeyDim
	if len(t.qn) < rows*nk {
		t.qn, t.kn = make([]float32, rows*nk), make([]float32, rows*nk)
	}
	for len(t.work) < workers {
		t.work = append(t.work, deltaScratch{})
	}
	n := min(rows, deltaChunk)
	for w := range t.work[:workers] {
		sc := &t.work[w]
		if len(sc.u) < n*d.ValueDim || len(sc.mem) < d.ValueDim {
			sc.u, sc.mem = make([]float32, deltaChunk*d.ValueDim), make([]float32, d.ValueDim)
			sc.beta, sc.w, sc.f = make([]float32, deltaChunk), make([]float32, deltaChunk), make([]float32, deltaChunk)
			sc.g = make([]float64, deltaChunk)
		}
	}
	in := d.In()
	for i := 0; i < rows; i++ {
		d.NormalizeQK(t.qn[i*nk:(i+1)*nk], t.kn[i*nk:(i+1)*nk], t.x[i*in:(i+1)*in])
	}
}

func (t *deltaTask) run(w, lo, hi int) {
	d := t.d
	size := d.KeyDim * d.ValueDim
	for j := lo; j < hi; j++ {
		Sin, Sout := t.Sin[j*size:(j+1)*size], t.Sout[j*size:(j+1)*size]
		if t.rows == 1 {
			var next []float32 // the state this worker reads next
			if j+1 < hi {
				next = t.Sin[(j+1)*size : (j+2)*size]
			}
			t.rowHead(j, Sin, Sout, next, &t.work[w])
			continue
		}
		for c := 0; c < t.rows; c += deltaChunk {
			t.chunkHead(j, c, min(deltaChunk, t.rows-c), Sin, Sout, &t.work[w])
			Sin = Sout // the next chunk continues from the state written
		}
	}
}

// runDeltaNet runs a gated_delta step.
func (r *recState) runDeltaNet(st *step, out []float32, in [][]float32, rows, cols int) {
	switch st.Op {
	case op.GatedDelta:
		t := &r.deltaTask
		*t = deltaTask{out: out, x: in[0], a: in[1], b: in[2], A: st.ws[0], dtBias: st.ws[1],
			Sin: r.prev[st.Slot], Sout: r.slots[st.Slot], d: *st.Delta, rows: rows, qn: t.qn, kn: t.kn, work: t.work}
		threads := 1
		if r.pool != nil {
			threads = min(r.threads, r.pool.threads)
		}
		t.prepare(rows, max(threads, 1))
		if r.pool == nil {
			t.run(0, 0, t.d.ValueHeads)
			return
		}
		r.pool.do(t, t.d.ValueHeads, 1, rows*t.d.State() >= minParallelElems, threads)
	}
}

// rowHead advances value head j by the task's one row: op.GatedDeltaRows
// on the vector kernels, reading the head's state from Sin and writing it
// to Sout in two passes over the state. With S the state before the row,
// the decayed state's product with k is decay*(S^T k), so the first pass
// takes S^T k, and the second (kernel.DecayRows) writes each row of
// decay*S + k (x) (beta*(v - decay*S^T k)) and adds it, times q, into the
// output as it goes, asking for the lines of next (the state the worker
// reads next, nil for none) so that its first pass finds them near.
func (t *deltaTask) rowHead(j int, Sin, Sout, next []float32, sc *deltaScratch) {
	d := t.d
	Dk, Dv, nk := d.KeyDim, d.ValueDim, d.KeyHeads*d.KeyDim
	kh := d.DeltaHead(j)
	q, k := t.qn[kh*Dk:(kh+1)*Dk], t.kn[kh*Dk:(kh+1)*Dk]
	v := t.x[2*nk+j*Dv : 2*nk+(j+1)*Dv]
	decay, beta := op.DeltaGates(t.a[j], t.b[j], t.A[j], t.dtBias[j])
	mem := sc.mem[:Dv]
	stateTimes(mem, Sin, k, Dv)
	for c := range mem {
		mem[c] = (v[c] - decay*mem[c]) * beta
	}
	o := t.out[j*Dv : (j+1)*Dv]
	clear(o)
	kernel.DecayRows(Sout, Sin, o, mem, k, q, decay, next)
}

// chunkHead advances value head j by rows lo..lo+n-1 as one chunk, from
// its state Sin to Sout (which may be Sin). With S0 the state before the
// chunk and G_t the summed log decays of rows 0..t, the rows' updates u_t
// (S_t = exp(g_t) S_{t-1} + k_t u_t^T) solve the triangular system
//
//	u_t = beta_t (v_t - exp(G_t) S0^T k_t - sum_{s<t} exp(G_t - G_s) (k_s.k_t) u_s)
//
// and then o_t = exp(G_t) S0^T q_t + sum_{s<=t} exp(G_t - G_s) (k_s.q_t) u_s,
// S_n = exp(G_n) S0 + sum_s exp(G_n - G_s) k_s u_s^T: the values of the
// row-by-row recurrence, summed in another order.
func (t *deltaTask) chunkHead(j, lo, n int, Sin, Sout []float32, sc *deltaScratch) {
	d := t.d
	Hv, Dk, Dv := d.ValueHeads, d.KeyDim, d.ValueDim
	in, nk := d.In(), d.KeyHeads*d.KeyDim
	kh := d.DeltaHead(j)
	U, mem, beta, W, G := sc.u[:n*Dv], sc.mem[:Dv], sc.beta[:n], sc.w[:n], sc.g[:n]
	acc := 0.0
	for r := 0; r < n; r++ {
		i := (lo + r) * Hv
		acc += op.DeltaLogDecay(t.a[i+j], t.A[j], t.dtBias[j])
		G[r], beta[r] = acc, op.SigmoidOf(t.b[i+j])
	}
	head := func(x []float32, r int) []float32 { return x[(lo+r)*nk+kh*Dk : (lo+r)*nk+(kh+1)*Dk] }
	keys := t.kn[lo*nk+kh*Dk:] // the chunk's keys of this head, rows nk apart
	for r := 0; r < n; r++ {
		kr, qr := head(t.kn, r), head(t.qn, r)
		er := float32(math.Exp(G[r]))
		u := U[r*Dv : (r+1)*Dv]
		v := t.x[(lo+r)*in+2*nk+j*Dv : (lo+r)*in+2*nk+(j+1)*Dv]
		stateTimes(mem, Sin, kr, Dv)
		for c := range u {
			u[c] = v[c] - er*mem[c]
		}
		if r > 0 {
			kernel.DotRows(W[:r], kr, keys, nk)
			for s := range W[:r] {
				W[s] *= -float32(math.Exp(G[r] - G[s]))
			}
			kernel.AxpyRows(u, W[:r], U, Dv)
		}
		for c := range u {
			u[c] *= beta[r]
		}
		o := t.out[(lo+r)*Hv*Dv+j*Dv : (lo+r)*Hv*Dv+(j+1)*Dv]
		stateTimes(mem, Sin, qr, Dv)
		for c := range o {
			o[c] = er * mem[c]
		}
		kernel.DotRows(W[:r+1], qr, keys, nk)
		for s := range W[:r+1] {
			W[s] *= float32(math.Exp(G[r] - G[s]))
		}
		kernel.AxpyRows(o, W[:r+1], U, Dv)
	}
	F := sc.f[:n]
	for s := range F {
		F[s] = float32(math.Exp(G[n-1] - G[s]))
	}
	kernel.Scale(Sout, Sin, float32(math.Exp(G[n-1])))
	for i := 0; i < Dk; i++ {
		for s := range W {
			W[s] = F[s] * keys[s*nk+i]
		}
		kernel.AxpyRows(Sout[i*Dv:(i+1)*Dv], W, U, Dv)
	}
}

// stateTimes sets m [Dv] = S^T v for S [len(v)][Dv].
func stateTimes(m, S, v []float32, Dv int) {
	clear(m)
	kernel.AxpyRows(m, v, S, Dv)
}
