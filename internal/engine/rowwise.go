package engine

import (
	"math"
	"slices"

	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
)

// minParallelElems is the number of elements below which a row-wise step
// (or the quantization of a linear's input) runs on the caller alone.
var minParallelElems = 1 << 14

// rowTask is one row-wise step (a norm, RoPE or an elementwise op) over
// rows of out, x and y, split across the workers by rows; prefill passes
// run these in parallel so that no step of a layer leaves a core idle.
type rowTask struct {
	s          *Session
	st         *step
	out, x, y  []float32
	cols       int
	fillAngles bool // RoPE: compute the rows' angles into s.rope first
}

// ropeTable holds the cos and sin of the rows of the last RoPE step, for
// the RoPE steps of the other layers, which nearly always rotate the same
// positions by the same frequencies.
type ropeTable struct {
	cos, sin []float32 // [row][rotDim/2]
	key      ropeKey   // what they hold
	freq     []float64 // and the frequencies and sections they hold
	sections []int
}

// ropeKey is what a RoPE step's angles depend on besides its frequencies
// and sections: the pass (its rows' positions) and the scale.
type ropeKey struct {
	pass  uint64
	rows  int
	scale float64
}

// holds reports whether the table holds the angles of RoPE step r over
// the rows of key. The frequencies are compared by value: a plan read
// from an artifact gives every step its own copy of them (comparing the
// slices' addresses computed the angles again at every step, about 60
// Sincos a pair and token on SmolLM2-135M).
func (t *ropeTable) holds(key ropeKey, r *plan.Rope) bool {
	return key == t.key && slices.Equal(r.InvFreq, t.freq) && slices.Equal(r.Sections, t.sections)
}

// rowWise runs st over rows of x (and y) into out.
func (s *Session) rowWise(st *step, out, x, y []float32, rows, cols int) {
	s.rowTask = rowTask{s: s, st: st, out: out, x: x, y: y, cols: cols}
	if st.Op == op.RoPE {
		r := st.Rope
		key := ropeKey{pass: s.passGen, rows: rows, scale: r.Scale}
		s.rowTask.fillAngles = !s.rope.holds(key, r)
		s.rope.key, s.rope.freq, s.rope.sections = key, r.InvFreq, r.Sections
	}
	s.pool.do(&s.rowTask, rows, 1, rows > 1 && rows*cols >= minParallelElems, s.threads)
}

// rowShift is the rotary shift of row t of the running pass (rotShift):
// its session's in a batched pass.
func (s *Session) rowShift(t int) int {
	if s.batch != nil {
		return s.batch[t].rotShift()
	}
	return s.rotShift()
}

// run computes rows [lo, hi) one row at a time, so that a row's result
// does not depend on how the rows were split (the SIMD kernels hand a
// call's last few elements to their generic version, which may round
// differently): any number of threads gives the same output.
func (r *rowTask) run(_, lo, hi int) {
	c, st := r.cols, r.st
	for t := lo; t < hi; t++ {
		out, x := r.out[t*c:(t+1)*c], r.x[t*c:(t+1)*c]
		switch st.Op {
		case op.RMSNorm:
			rmsNorm(out, x, st.w, c, st.Eps, st.Offset)
		case op.HeadRMSNorm:
			if st.w == nil { // no gain weight
				unitHeadRMSNorm(out, x, st.HeadDim, st.Eps, st.Offset)
				break
			}
			headRMSNorm(out, x, st.w, st.HeadDim, st.Eps, st.Offset)
		case op.Add:
			kernel.Add(out, x, r.y[t*c:(t+1)*c])
		case op.Mul:
			kernel.Mul(out, x, r.y[t*c:(t+1)*c])
		case op.Scale:
			if st.w != nil { // a learned scalar
				kernel.Scale(out, x, st.Scale*st.w[0])
				break
			}
			kernel.Scale(out, x, st.Scale)
		case op.SiLU:
			kernel.SiLU(out, x)
		case op.GELUTanh:
			kernel.GELUTanh(out, x)
		case op.GELUF16:
			kernel.GELUF16(out, x)
		case op.Hadamard:
			hadamardRow(out, x, st.HeadDim)
		case op.LayerNorm:
			op.LayerNormRows(out, x, st.ws[0], st.ws[1], c, st.Eps)
		case op.RoPE:
			p, h2 := st.Rope, st.Rope.RotDim/2
			cos, sin := r.s.rope.cos[t*h2:(t+1)*h2], r.s.rope.sin[t*h2:(t+1)*h2]
			if r.fillAngles {
				if pos := r.s.ropePos; pos != nil {
					P := r.s.ropeP
					ropeAnglesAt(cos, sin, pos[t*P:(t+1)*P], p.Sections, p.InvFreq, p.Scale)
				} else {
					ropeAngles(cos, sin, r.s.rowPos[t]+r.s.rowShift(t), p.InvFreq, p.Scale)
				}
			}
			copy(out, x)
			ropeRow(out, p.HeadDim, p.RotDim, p.Half, cos, sin)
		}
	}
}

// hadamardRow sets out to x times blockdiag(H_P)/sqrt(P) (op.HadamardRows,
// on the SIMD butterfly); P is a power of two dividing len(x) (the plan
// was validated).
func hadamardRow(out, x []float32, P int) {
	copy(out, x)
	for b := 0; b+P <= len(out); b += P {
		_ = kernel.FWHT(out[b : b+P])
	}
	kernel.Scale(out, out, float32(1/math.Sqrt(float64(P))))
}
