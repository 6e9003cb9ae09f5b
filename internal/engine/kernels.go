package engine

import (
	"math"
	"sync"

	"github.com/aotlm/aotlm/internal/kernel"
)

// MaskValue is added to the attention scores of positions a row may not
// see: a large finite negative, so exp underflows to exactly 0 and no
// -Inf - -Inf = NaN can arise.
const MaskValue = -1e30

// linearJob is dst[t][j] = sum_k x[t][k]*w[j][k] (+ b[j]) for t < T,
// x [T, K], w [N, K], b [N] or nil, dst [T, N]. Float32 weights go
// through the SIMD row kernels (kernel.DotRows: each weight row is read
// once for all T rows), so the sums are float32 in the kernel's order;
// binary16 weights (qw.h) the same way through kernel.DotRowsF16W.
type linearJob struct {
	dst, x, w, b []float32
	qw           *qweight // when set, the weight (w is nil)
	xq           *kernel.Q8
	T, K, N      int
	// lora, when set, adds the low-rank products of the chosen adapters
	// to the columns computed, as member member of its linears.
	lora   *adapterTask
	member int
}

// run computes output columns [j0, j1), with the adapters' products.
func (l *linearJob) run(w, j0, j1 int) {
	l.compute(w, j0, j1)
	if l.lora != nil {
		l.lora.addColumns(l.member, j0, j1)
	}
}

// compute computes output columns [j0, j1) of the base linear.
func (l *linearJob) compute(_, j0, j1 int) {
	if l.qw != nil {
		if l.qw.packed() {
			l.runPacked(j0, j1)
			return
		}
		if l.qw.runPlain != nil {
			l.qw.runPlain(l, j0, j1)
			return
		}
	}
	K, N, T := l.K, l.N, l.T
	// Blocks of rows whose inputs fit in a core's cache: each weight row
	// is read once per block, rather than the whole input once per
	// weight row (what makes long passes, such as a vision encoder's
	// thousand patches, memory-bound). Row sums do not depend on it.
	tb := max(linearBlockBytes/(4*K), 8)
	p := rowSums.Get().(*[]float32)
	if cap(*p) < min(T, tb) {
		*p = make([]float32, min(T, tb))
	}
	for t0 := 0; t0 < T; t0 += tb {
		rows := min(tb, T-t0)
		x := l.x[t0*K : (t0+rows)*K]
		tmp := (*p)[:rows]
		dst := l.dst[t0*N:]
		for j := j0; j < j1; j++ {
			var b float32
			if l.b != nil {
				b = l.b[j]
			}
			// DotRows for one row too: a row's sum has the same order whatever
			// the pass holds (decode, prefill, a batch of sessions)
			if l.qw != nil {
				kernel.DotRowsF16W(tmp, l.qw.h[j*K:(j+1)*K], x, K)
			} else {
				kernel.DotRows(tmp, l.w[j*K:(j+1)*K], x, K)
			}
			for t, v := range tmp {
				dst[t*N+j] = v + b
			}
		}
	}
	rowSums.Put(p)
}

// linearBlockBytes is the most input bytes a float32 linear multiplies by
// a weight row at once (see linearJob.run); text passes of up to 32 rows
// of 4096 fit in one block.
var linearBlockBytes = 512 << 10

// rowSums holds the T sums of one weight row of a float32 linear.
var rowSums = sync.Pool{New: func() any { return new([]float32) }}

// rmsNorm is dst[t][c] = (w[c] + offset) * x[t][c] / sqrt(mean_c(x[t]^2) + eps)
// for x, dst [T, C].
func rmsNorm(dst, x, w []float32, C int, eps, offset float32) {
	for t := 0; t*C < len(x); t++ {
		row, out := x[t*C:(t+1)*C], dst[t*C:(t+1)*C]
		ss := kernel.Dot(row, row)/float32(C) + eps
		inv := float32(1 / math.Sqrt(float64(ss)))
		if offset == 0 {
			kernel.Mul(out, row, w[:C])
			kernel.Scale(out, out, inv)
			continue
		}
		for c, v := range row {
			out[c] = (w[c] + offset) * (inv * v)
		}
	}
}

// headRMSNorm is rmsNorm applied to each E-wide head on its own:
// x, dst [T, heads*E], w [E] shared by the heads. A [T, heads*E] matrix is
// a [T*heads, E] one, so it is rmsNorm over E columns.
func headRMSNorm(dst, x, w []float32, E int, eps, offset float32) {
	rmsNorm(dst, x, w, E, eps, offset)
}

// rope rotates in place every head of x [T, C], row t at position pos+t:
// pair i of a head turns by (pos+t)*invFreq[i], and with scale other than
// 0 and 1 is multiplied by scale. cos and sin are scratch of at least
// rotDim/2 floats.
func rope(x []float32, T, C, pos, headDim, rotDim int, half bool, invFreq []float64, scale float64, cos, sin []float32) {
	for t := 0; t < T; t++ {
		ropeAngles(cos, sin, pos+t, invFreq, scale)
		ropeRow(x[t*C:(t+1)*C], headDim, rotDim, half, cos, sin)
	}
}

// ropeAngles sets cos[i], sin[i] to the rotation of pair i at position
// pos (times scale when it is other than 0 and 1).
func ropeAngles(cos, sin []float32, pos int, invFreq []float64, scale float64) {
	p := float64(pos)
	for i, f := range invFreq {
		s, c := math.Sincos(p * f)
		if scale != 0 && scale != 1 {
			s, c = s*scale, c*scale
		}
		cos[i], sin[i] = float32(c), float32(s)
	}
}

// ropeAnglesAt is ropeAngles for a row of several position components:
// pair i turns by pos[j]*invFreq[i], j the section holding pair i
// (sections nil: component 0).
func ropeAnglesAt(cos, sin []float32, pos []int, sections []int, invFreq []float64, scale float64) {
	j, left := 0, len(invFreq)
	if len(sections) > 0 {
		left = sections[0]
	}
	for i, f := range invFreq {
		for left == 0 && j+1 < len(sections) {
			j++
			left = sections[j]
		}
		left--
		s, c := math.Sincos(float64(pos[j]) * f)
		if scale != 0 && scale != 1 {
			s, c = s*scale, c*scale
		}
		cos[i], sin[i] = float32(c), float32(s)
	}
}

// ropeRow rotates every headDim-wide head of one row by cos and sin:
// the pairs (i, i+rotDim/2) in half (NeoX) style, through the SIMD
// kernel.Rotate (a SmolLM2-135M row of 9 heads took 1.2-2 us in the
// scalar loop, a decode token 30 of them), else the pairs (2i, 2i+1).
func ropeRow(row []float32, headDim, rotDim int, half bool, cos, sin []float32) {
	E, h2 := headDim, rotDim/2
	cos, sin = cos[:h2], sin[:h2]
	for h := 0; h*E < len(row); h++ {
		head := row[h*E : (h+1)*E]
		if half {
			kernel.Rotate(head[:h2], head[h2:2*h2], cos, sin)
			continue
		}
		for i := range h2 {
			v0, v1 := head[2*i], head[2*i+1]
			head[2*i] = v0*cos[i] - v1*sin[i]
			head[2*i+1] = v0*sin[i] + v1*cos[i]
		}
	}
}

// attnArgs describes one attention step of T valid rows at position pos.
type attnArgs struct {
	out, q, k, v []float32 // out, q [T, H*E]; k, v [T, G*E]
	K, V         []float32 // cache layer, transposed: column c at [c*stride, c*stride+ctx)
	C            int       // cache columns
	stride       int       // slots per key/value head of the cache layer
	ring         int       // the layer's ring length (ringkv.go), 0: a slot per position
	T, pos       int       // rows, and the cache slot of row 0 (the committed positions)
	H, G, E      int
	scale        float32
	window       int
	// rowPos and mask describe a pass that is not a chain: row t is at
	// position rowPos[t] and sees the committed slots and the slots pos+j
	// of the rows j that mask allows. nil: row t is at pos+t and sees
	// every slot up to pos+t.
	rowPos []int
	mask   *Mask
	// A uint8 cache (Ku, Vu non-nil) replaces K and V; ks, vs are its
	// scales, one per layer or one per key/value head.
	Ku, Vu []uint8
	ks, vs []float32
	// A binary16 cache (Kh, Vh non-nil) replaces K and V.
	Kh, Vh []uint16
	// A 4-bit cache (Kq, Vq non-nil) replaces K and V: rows of
	// kernel.KVQ4RowBytes(E) bytes, of values rotated by
	// kernel.RotateHead, and of keys rotated too when rotK is set.
	Kq, Vq []uint8
	rotK   bool
	// kmu and vmu are a 4-bit cache's centers, [G*E] (nil: none): kmu is
	// subtracted from a key and vmu from a value before they are stored,
	// and vmu added back to the attention output.
	kmu, vmu []float32
}
