package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/op"
)

// TestSSMChunkedMatchesRows checks the chunked Mamba2 scan against the
// row-by-row reference (op.SSMScanRows) on random inputs and a random
// starting state, for passes of one row, within one chunk and across
// chunks, heads sharing groups, on one worker and split over two:
// outputs and the final state agree within 1e-5 relative to their largest
// magnitude (float32 sums in another order).
func TestSSMChunkedMatchesRows(t *testing.T) {
	const H, P, G, N = 6, 12, 2, 16 // 3 heads a group; 12 and 16 leave SIMD tails
	r := rand.New(rand.NewPCG(5, 9))
	fill := func(n int, lo, hi float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = lo + (hi-lo)*r.Float32()
		}
		return v
	}
	p := newPool(2)
	defer p.close()
	for _, T := range []int{1, 5, ssmChunk, ssmChunk + 3, 2*ssmChunk + 17} {
		x, dt := fill(T*H*P, -2, 2), fill(T*H, -3, 2)
		b, c := fill(T*G*N, -1, 1), fill(T*G*N, -1, 1)
		A, D, bias := fill(H, -2, -0.05), fill(H, -1, 1), fill(H, -0.5, 0.5)
		S0 := fill(H*P*N, -1, 1)
		want := make([]float32, T*H*P)
		Sw := append([]float32(nil), S0...)
		op.SSMScanRows(want, x, dt, b, c, A, D, bias, Sw, T, H, P, G, N)
		for _, threads := range []int{1, 2} {
			got, Sg := make([]float32, T*H*P), append([]float32(nil), S0...)
			task := &ssmTask{out: got, x: x, dt: dt, b: b, c: c, A: A, D: D, dtBias: bias, S: Sg, rows: T, H: H, P: P, G: G, N: N}
			for range threads {
				task.work = append(task.work, newSSMScratch())
			}
			p.do(task, H, 1, true, threads)
			for _, cmp := range []struct {
				name      string
				got, want []float32
			}{{"output", got, want}, {"state", Sg, Sw}} {
				var worst, scale float64
				for i := range cmp.want {
					worst = math.Max(worst, math.Abs(float64(cmp.got[i]-cmp.want[i])))
					scale = math.Max(scale, math.Abs(float64(cmp.want[i])))
				}
				if worst > 1e-5*math.Max(scale, 1) {
					t.Errorf("T=%d threads=%d %s: chunked differs by %.3g (largest value %.3g)", T, threads, cmp.name, worst, scale)
				}
			}
		}
	}
}

// BenchmarkSSMScan512 scans a 512-row prefill through one Mamba2 layer of
// Granite 4.0-H's size (48 heads of 64, one group of 128 state dims): the
// row-by-row reference and the chunked form on one worker.
func BenchmarkSSMScan512(b *testing.B) {
	const T, H, P, G, N = 512, 48, 64, 1, 128
	r := rand.New(rand.NewPCG(1, 2))
	fill := func(n int, lo, hi float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = lo + (hi-lo)*r.Float32()
		}
		return v
	}
	x, dt, bb, c := fill(T*H*P, -2, 2), fill(T*H, -3, 2), fill(T*G*N, -1, 1), fill(T*G*N, -1, 1)
	A, D, bias := fill(H, -2, -0.05), fill(H, -1, 1), fill(H, -0.5, 0.5)
	out, S := make([]float32, T*H*P), make([]float32, H*P*N)
	b.Run("rows", func(b *testing.B) {
		for b.Loop() {
			op.SSMScanRows(out, x, dt, bb, c, A, D, bias, S, T, H, P, G, N)
		}
	})
	b.Run("chunked", func(b *testing.B) {
		task := &ssmTask{out: out, x: x, dt: dt, b: bb, c: c, A: A, D: D, dtBias: bias, S: S, rows: T, H: H, P: P, G: G, N: N,
			work: []ssmScratch{newSSMScratch()}}
		for b.Loop() {
			task.run(0, 0, H)
		}
	})
}
