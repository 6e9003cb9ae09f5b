package engine

import (
	"unsafe"

	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
)

// viewBlockParts views the unpacked parts of the families stored as
// integers with per-row or per-block parameters (w8, lpbq, q4).
func viewBlockParts(w *qweight, p plan.Parts, data []byte) {
	w.q = unsafe.Slice((*int8)(unsafe.Pointer(&data[0])), w.N*w.K)
	if p.Codes >= 0 {
		w.codes = data[p.Codes : p.Codes+int64(w.N*w.nb)]
	}
	w.scales = floats(data[p.Scales : p.Scales+4*p.NScales])
	if p.Zeros >= 0 {
		w.zeros = floats(data[p.Zeros : p.Zeros+4*p.NScales])
	}
}

// bindQ4 checks a packed 4-bit weight (lpbq, q4, q4k) and binds its
// kernels; its zero points (and K4 records where the kernels lack them)
// are readied for the fast kernels (kernel.Q4.PrepareZeros).
func bindQ4(w *qweight, q *kernel.Q4) error {
	if err := q.Check(); err != nil {
		return err
	}
	q.PrepareZeros()
	w.matMul, w.rowOf, w.forQ4 = q.MatMul, q.Row, true
	return nil
}

// runPacked computes output columns [j0, j1) of a packed weight with the
// int8 activations l.xq (quantized from l.x by the caller), then adds the
// bias.
func (l *linearJob) runPacked(j0, j1 int) {
	l.qw.matMul(l.dst, l.N, l.xq, j0, j1)
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
// lora, when set, adds the adapters' products (prepareAdapters).
func (s *Session) linear(st *step, out, x []float32, T, K, N int, lora *adapterTask) {
	job := s.linearJob(st, out, x, T, K, N)
	job.lora = lora
	s.pool.linear(job, s.threads)
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
// lora, when set, adds the adapters' products (prepareAdapters).
func (s *Session) linearGroup(steps []step, i int, x []float32, T, K int, out func(id int) ([]float32, int, int), lora *adapterTask) {
	var jobs [maxFuse]linearJob
	n := steps[i].fuse + 1
	for m := 0; m < n; m++ {
		st := &steps[i+m]
		s.bufRows[st.Out] = T
		o, _, cols := out(st.Out)
		jobs[m] = s.linearJob(st, o, x, T, K, cols)
		jobs[m].lora, jobs[m].member = lora, m
	}
	s.pool.linears(jobs[:n], s.threads)
}
