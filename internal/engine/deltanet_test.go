package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/op"
)

// runDeltaTask runs a gated_delta step of T rows on one worker.
func runDeltaTask(out, x, a, b, A, dtBias, Sin, Sout []float32, T int, d op.DeltaDims) {
	t := deltaTask{out: out, x: x, a: a, b: b, A: A, dtBias: dtBias, Sin: Sin, Sout: Sout, d: d, rows: T}
	t.prepare(T, 1)
	t.run(0, 0, d.ValueHeads)
}

// TestDeltaChunkedMatchesRows checks the chunked delta rule against the
// one-row reference (op.GatedDeltaRows) on random inputs and a random
// starting state, for pass lengths within one chunk and across chunks:
// outputs and the final state agree within 1e-5 relative to their largest
// magnitude (float32 sums in another order).
func TestDeltaChunkedMatchesRows(t *testing.T) {
	d := op.DeltaDims{KeyHeads: 2, ValueHeads: 6, KeyDim: 8, ValueDim: 12}
	r := rand.New(rand.NewPCG(7, 35))
	fill := func(n int, lo, hi float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = lo + (hi-lo)*r.Float32()
		}
		return v
	}
	for _, T := range []int{2, 5, deltaChunk, deltaChunk + 3, 2*deltaChunk + 17} {
		x := fill(T*d.In(), -2, 2)
		a, b := fill(T*d.ValueHeads, -3, 3), fill(T*d.ValueHeads, -3, 3)
		A, dt := fill(d.ValueHeads, -2, -0.05), fill(d.ValueHeads, -1, 1)
		S0 := fill(d.State(), -1, 1)
		want, got := make([]float32, T*d.Out()), make([]float32, T*d.Out())
		Sw, Sg := append([]float32(nil), S0...), append([]float32(nil), S0...)
		op.GatedDeltaRows(want, x, a, b, A, dt, Sw, Sw, T, d, make([]float32, d.Temp()))
		runDeltaTask(got, x, a, b, A, dt, S0, Sg, T, d)
		for _, c := range []struct {
			name      string
			got, want []float32
		}{{"output", got, want}, {"state", Sg, Sw}} {
			var worst, scale float64
			for i := range c.want {
				worst = math.Max(worst, math.Abs(float64(c.got[i]-c.want[i])))
				scale = math.Max(scale, math.Abs(float64(c.want[i])))
			}
			if worst > 1e-5*math.Max(scale, 1) {
				t.Errorf("T=%d %s: chunked differs by %.3g (largest value %.3g)", T, c.name, worst, scale)
			}
		}
	}
}

// TestDeltaRowMatchesRows checks the one-row delta rule on the SIMD vector
// kernels against op.GatedDeltaRows on random inputs and states, for head
// sizes with and without a SIMD tail, in place and out of place: outputs
// and state within 1e-5 relative to their largest magnitude.
func TestDeltaRowMatchesRows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	fill := func(n int, lo, hi float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = lo + (hi-lo)*r.Float32()
		}
		return v
	}
	for _, d := range []op.DeltaDims{
		{KeyHeads: 2, ValueHeads: 4, KeyDim: 16, ValueDim: 16},
		{KeyHeads: 2, ValueHeads: 6, KeyDim: 8, ValueDim: 13},
		{KeyHeads: 4, ValueHeads: 8, KeyDim: 128, ValueDim: 128},
	} {
		for _, inPlace := range []bool{false, true} {
			x := fill(d.In(), -2, 2)
			a, b := fill(d.ValueHeads, -3, 3), fill(d.ValueHeads, -3, 3)
			A, dt := fill(d.ValueHeads, -2, -0.05), fill(d.ValueHeads, -1, 1)
			S0 := fill(d.State(), -1, 1)
			want, got := make([]float32, d.Out()), make([]float32, d.Out())
			Sw := append([]float32(nil), S0...)
			op.GatedDeltaRows(want, x, a, b, A, dt, Sw, Sw, 1, d, make([]float32, d.Temp()))
			Sin, Sg := S0, make([]float32, len(S0))
			if inPlace {
				Sin = append([]float32(nil), S0...)
				Sg = Sin
			}
			runDeltaTask(got, x, a, b, A, dt, Sin, Sg, 1, d)
			for _, c := range []struct {
				name      string
				got, want []float32
			}{{"output", got, want}, {"state", Sg, Sw}} {
				var worst, scale float64
				for i := range c.want {
					worst = math.Max(worst, math.Abs(float64(c.got[i]-c.want[i])))
					scale = math.Max(scale, math.Abs(float64(c.want[i])))
				}
				if worst > 1e-5*math.Max(scale, 1) {
					t.Errorf("%+v in place %v %s: differs by %.3g (largest value %.3g)", d, inPlace, c.name, worst, scale)
				}
			}
		}
	}
}

// BenchmarkDeltaRow times one decode step of a Qwen3.5-0.8B-shaped Gated
// DeltaNet layer (16 key and value heads of 128): the SIMD form and the
// reference.
func BenchmarkDeltaRow(b *testing.B) {
	d := op.DeltaDims{KeyHeads: 16, ValueHeads: 16, KeyDim: 128, ValueDim: 128}
	r := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = r.Float32() - 0.5
		}
		return v
	}
	x, a, bb, A, dt, S := fill(d.In()), fill(16), fill(16), fill(16), fill(16), fill(d.State())
	out, tmp := make([]float32, d.Out()), make([]float32, d.Temp())
	b.Run("simd", func(b *testing.B) {
		t := deltaTask{out: out, x: x, a: a, b: bb, A: A, dtBias: dt, Sin: S, Sout: S, d: d, rows: 1}
		for b.Loop() {
			t.prepare(1, 1)
			t.run(0, 0, d.ValueHeads)
		}
	})
	b.Run("reference", func(b *testing.B) {
		for b.Loop() {
			op.GatedDeltaRows(out, x, a, bb, A, dt, S, S, 1, d, tmp)
		}
	})
}

// BenchmarkDeltaRowLayers times one decode step of the 18 Gated DeltaNet
// layers of Qwen3.5-0.8B, each layer's state (1 MiB) read from Sin and
// written to Sout as in a session that keeps state snapshots: 36 MiB in
// all, more than the caches keep between two of a layer's steps.
func BenchmarkDeltaRowLayers(b *testing.B) {
	d := op.DeltaDims{KeyHeads: 16, ValueHeads: 16, KeyDim: 128, ValueDim: 128}
	const layers = 18
	r := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = r.Float32() - 0.5
		}
		return v
	}
	x, a, bb, A, dt := fill(d.In()), fill(16), fill(16), fill(16), fill(16)
	var Sin, Sout [layers][]float32
	for l := range Sin {
		Sin[l], Sout[l] = fill(d.State()), make([]float32, d.State())
	}
	out := make([]float32, d.Out())
	t := deltaTask{out: out, x: x, a: a, b: bb, A: A, dtBias: dt, d: d, rows: 1}
	for b.Loop() {
		for l := range Sin {
			t.Sin, t.Sout = Sin[l], Sout[l]
			t.prepare(1, 1)
			t.run(0, 0, d.ValueHeads)
		}
	}
}

// BenchmarkDeltaPass times a pass of 64 rows of a Qwen3.5-0.8B-shaped
// Gated DeltaNet layer: the chunked form, and the one-row form row by row.
func BenchmarkDeltaPass(b *testing.B) {
	d := op.DeltaDims{KeyHeads: 16, ValueHeads: 16, KeyDim: 128, ValueDim: 128}
	const T = 64
	r := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = r.Float32() - 0.5
		}
		return v
	}
	x, a, bb, A, dt, S := fill(T*d.In()), fill(T*16), fill(T*16), fill(16), fill(16), fill(d.State())
	out := make([]float32, T*d.Out())
	b.Run("chunked", func(b *testing.B) {
		t := deltaTask{out: out, x: x, a: a, b: bb, A: A, dtBias: dt, Sin: S, Sout: S, d: d, rows: T}
		for b.Loop() {
			t.prepare(T, 1)
			t.run(0, 0, d.ValueHeads)
		}
	})
	b.Run("rows", func(b *testing.B) {
		var t deltaTask
		for b.Loop() {
			for i := 0; i < T; i++ {
				t = deltaTask{out: out[i*d.Out():], x: x[i*d.In():], a: a[i*16:], b: bb[i*16:], A: A, dtBias: dt,
					Sin: S, Sout: S, d: d, rows: 1, qn: t.qn, kn: t.kn, work: t.work}
				t.prepare(1, 1)
				t.run(0, 0, d.ValueHeads)
			}
		}
	})
}
