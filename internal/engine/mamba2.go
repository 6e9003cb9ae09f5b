package engine

import (
	"math"

	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/op"
)

// Mamba2's selective scan (op.SSMScanRows is its plain form) over a pass's
// valid rows. Its heads are independent: they are split across the
// session's workers. Each head takes the rows in chunks of up to
// ssmChunk, in the chunked (state-space dual) form: every row of a chunk
// reads the state before the chunk, the rows before it in the chunk are
// added through their B.C products, and the state is written once at the
// chunk's end. Both sums run on the SIMD vector kernels.

// ssmChunk is the most rows a head takes at once: the in-chunk sums grow
// with the square of the rows.
const ssmChunk = 64

// ssmTask is one ssm_scan step over its heads.
type ssmTask struct {
	out, x, dt, b, c, A, D, dtBias, S []float32
	rows, H, P, G, N                  int
	work                              []ssmScratch
}

// ssmScratch is one worker's scratch.
type ssmScratch struct {
	w, f []float32 // a row's coefficients over the chunk's rows; the rows' weights in the new state
	d    []float32 // the chunk's step sizes (softplus of dt)
	g    []float64 // the chunk's summed log decays
}

// newSSMScratch returns one worker's scratch for chunks of ssmChunk rows.
func newSSMScratch() ssmScratch {
	return ssmScratch{w: make([]float32, ssmChunk), f: make([]float32, ssmChunk),
		d: make([]float32, ssmChunk), g: make([]float64, ssmChunk)}
}

// ssmScan runs an ssm_scan step over the pass's valid rows, carrying the
// [H, P, N] state of its slot: one call scans every row of the pass in
// order. Its inputs are x [rows, cols], dt [rows, H], B and C [rows, G*N];
// ws holds A, D and dt_bias.
func (r *recState) ssmScan(st *step, out []float32, in [][]float32, rows, cols int) {
	S := r.slots[st.Slot]
	H := len(st.ws[0])
	N := len(S) / cols
	G := len(in[2]) / max(rows, 1) / N
	t := &r.ssmTask
	*t = ssmTask{out: out, x: in[0], dt: in[1], b: in[2], c: in[3], A: st.ws[0], D: st.ws[1], dtBias: st.ws[2], S: S,
		rows: rows, H: H, P: st.HeadDim, G: G, N: N, work: t.work}
	threads := 1
	if r.pool != nil {
		threads = max(min(r.threads, r.pool.threads), 1)
	}
	for len(t.work) < threads {
		t.work = append(t.work, newSSMScratch())
	}
	if r.pool == nil {
		t.run(0, 0, H)
		return
	}
	r.pool.do(t, H, 1, rows*len(S) >= minParallelElems, threads)
}

func (t *ssmTask) run(w, lo, hi int) {
	for h := lo; h < hi; h++ {
		for c := 0; c < t.rows; c += ssmChunk {
			t.chunkHead(h, c, min(ssmChunk, t.rows-c), &t.work[w])
		}
	}
}

// chunkHead advances head h by rows lo..lo+n-1 as one chunk. With S0 the
// head's state before the chunk, d_t the rows' step sizes and G_t the
// summed log decays d_s A of rows 0..t:
//
//	out_t = exp(G_t) S0 C_t + sum_{s<=t} exp(G_t - G_s) d_s (C_t.B_s) x_s + D x_t
//	S_n   = exp(G_n) S0 + sum_s exp(G_n - G_s) d_s x_s B_s^T
//
// the values of the row-by-row recurrence, summed in another order.
func (t *ssmTask) chunkHead(h, lo, n int, sc *ssmScratch) {
	P, N, HP, GN := t.P, t.N, t.H*t.P, t.G*t.N
	g := h / (t.H / t.G)
	W, F, d, G := sc.w[:n], sc.f[:n], sc.d[:n], sc.g[:n]
	acc := 0.0
	for r := 0; r < n; r++ {
		d[r] = float32(op.Softplus(float64(t.dt[(lo+r)*t.H+h] + t.dtBias[h])))
		acc += float64(d[r] * t.A[h])
		G[r] = acc
	}
	S := t.S[h*P*N : (h+1)*P*N]
	xs := t.x[lo*HP+h*P:] // the chunk's x of this head, rows HP apart
	bs := t.b[lo*GN+g*N:] // the chunk's B of this head's group, rows GN apart
	for r := 0; r < n; r++ {
		cr := t.c[(lo+r)*GN+g*N : (lo+r)*GN+(g+1)*N]
		o := t.out[(lo+r)*HP+h*P : (lo+r)*HP+(h+1)*P]
		kernel.DotRows(o, cr, S, N)
		kernel.Scale(o, o, float32(math.Exp(G[r])))
		kernel.DotRows(W[:r+1], cr, bs, GN)
		for s := range W[:r+1] {
			W[s] *= float32(math.Exp(G[r]-G[s])) * d[s]
		}
		kernel.AxpyRows(o, W[:r+1], xs, HP)
		kernel.Axpy(o, t.D[h], t.x[(lo+r)*HP+h*P:(lo+r)*HP+(h+1)*P])
	}
	for s := range F {
		F[s] = float32(math.Exp(G[n-1]-G[s])) * d[s]
	}
	kernel.Scale(S, S, float32(math.Exp(G[n-1])))
	for p := 0; p < P; p++ {
		for s := range W {
			W[s] = F[s] * xs[s*HP+p]
		}
		kernel.AxpyRows(S[p*N:(p+1)*N], W, bs, GN)
	}
}

// addConvBiasRows adds b to each of the rows of out.
func addConvBiasRows(out, b []float32, rows int) {
	C := len(b)
	for t := range rows {
		o := out[t*C : (t+1)*C]
		for c, v := range b {
			o[c] += v
		}
	}
}
