package engine

import (
	"fmt"
	"unsafe"

	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
)

// viewPacked views a packed weight's parts (plan.WeightLayout, "-p") as
// the kernel package's types, in place.
func (w *qweight) viewPacked(name string, p plan.Parts, data []byte) error {
	N, K := w.N, w.K
	if w.kind == plan.LayoutW8 {
		w.w8 = &kernel.W8{N: N, K: K, U: data[:N*K], Scales: floats(data[p.Scales : p.Scales+4*p.NScales])}
		if err := w.w8.Check(); err != nil {
			return fmt.Errorf("tensor %q: %w", name, err)
		}
		return nil
	}
	if w.kind == plan.LayoutQ6K {
		sub := data[p.Sub:p.Scales]
		w.q6 = &kernel.Q6{N: N, K: K, Nib: data[:p.Codes], Hi: data[p.Codes:p.Sub],
			Sub: unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(sub))), len(sub)), D: floats(data[p.Scales:p.Size])}
		if err := w.q6.Check(); err != nil {
			return fmt.Errorf("tensor %q: %w", name, err)
		}
		return nil
	}
	q := &kernel.Q4{N: N, K: K, Nib: data[:N*K/2]}
	if w.kind == plan.LayoutQ4K {
		q.K4 = data[p.Scales:p.Size]
	} else {
		q.Scales = floats(data[p.Scales : p.Scales+4*p.NScales])
	}
	if p.Codes >= 0 {
		q.Codes = data[p.Codes : p.Codes+int64(N*K/kernel.QK)]
	}
	if p.Zeros >= 0 {
		q.Zeros = floats(data[p.Zeros : p.Zeros+4*p.NScales])
	}
	if err := q.Check(); err != nil {
		return fmt.Errorf("tensor %q: %w", name, err)
	}
	q.PrepareZeros() // zero points (and K4 where the kernels lack it): the fast kernels plus block terms
	w.q4 = q
	return nil
}

// runPacked computes output columns [j0, j1) of a packed weight with the
// int8 activations l.xq (quantized from l.x by the caller), then adds the
// bias.
func (l *linearJob) runPacked(j0, j1 int) {
	switch {
	case l.qw.q4 != nil:
		l.qw.q4.MatMul(l.dst, l.N, l.xq, j0, j1)
	case l.qw.q6 != nil:
		l.qw.q6.MatMul(l.dst, l.N, l.xq, j0, j1)
	default:
		l.qw.w8.MatMul(l.dst, l.N, l.xq, j0, j1)
	}
	if l.b != nil {
		for t := 0; t < l.T; t++ {
			row := l.dst[t*l.N : (t+1)*l.N]
			for j := j0; j < j1; j++ {
				row[j] += l.b[j]
			}
		}
	}
}

// q8Buf is a session's room for the int8 activations of the largest
// packed linear input.
type q8Buf struct {
	q   []int8
	d   []float32
	sum []int32
	x   kernel.Q8
}

// begin views the buffer as T rows of K activations, to be filled by
// quantizeTask, with the records of the product kinds asked for.
func (b *q8Buf) begin(T, K int, forQ4, forW8 bool) {
	nb := T * K / kernel.QK
	b.x.K, b.x.Q, b.x.D, b.x.Sum = K, b.q[:T*K], b.d[:nb], b.sum[:nb]
	b.x.Begin(T, forQ4, forW8)
}

// quantizeTask quantizes rows of x into a q8Buf, split by rows.
type quantizeTask struct {
	b *q8Buf
	x []float32
}

func (q *quantizeTask) run(_, lo, hi int) { q.b.x.QuantizeRows(q.x, lo, hi) }

func newQ8Buf(n int) q8Buf {
	return q8Buf{q: make([]int8, n), d: make([]float32, n/kernel.QK), sum: make([]int32, n/kernel.QK)}
}

// linear runs one linear step over rows x [T, K] into out [T, N].
func (s *Session) linear(st *step, out, x []float32, T, K, N int) {
	s.pool.linear(s.linearJob(st, out, x, T, K, N), s.threads)
}

// linearJob prepares the job of one linear step, quantizing its input when
// the step is the first of its run on that buffer.
func (s *Session) linearJob(st *step, out, x []float32, T, K, N int) linearJob {
	job := linearJob{dst: out, x: x, w: st.w, b: st.b, qw: st.qw, T: T, K: K, N: N}
	if st.qw != nil && st.qw.packed() {
		// Linears in a row that read one buffer (q, k and v; gate and
		// up) quantize it once: the buffer is live until the last of
		// them, so no step in between can have overwritten it.
		if s.q8In != st.In[0] || s.q8.x.T != T || s.q8.x.K != K {
			s.q8.begin(T, K, st.runQ4, st.runW8)
			s.quantTask = quantizeTask{b: &s.q8, x: x}
			s.pool.do(&s.quantTask, T, 1, T*K >= minParallelElems, s.threads)
			s.q8In = st.In[0]
		}
		job.xq = &s.q8.x
	}
	return job
}

// linearGroup runs steps[i] and the st.fuse linears after it (fuseLinears)
// over rows x [T, K] as one dispatch, setting the members' row counts.
func (s *Session) linearGroup(steps []step, i int, x []float32, T, K int, out func(id int) ([]float32, int, int)) {
	var jobs [maxFuse]linearJob
	n := steps[i].fuse + 1
	for m := 0; m < n; m++ {
		st := &steps[i+m]
		s.bufRows[st.Out] = T
		o, _, cols := out(st.Out)
		jobs[m] = s.linearJob(st, o, x, T, K, cols)
	}
	s.pool.linears(jobs[:n], s.threads)
}
