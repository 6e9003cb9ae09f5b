package engine

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/tensor"
)

// BenchmarkPackedDecodeLinear is one decode row through a packed linear
// of 1024 by 1024 weights of each packed layout, on one thread, as the
// engine opens it (newQWeight) and runs it (linearJob.run).
func BenchmarkPackedDecodeLinear(b *testing.B) {
	const K, N = 1024, 1024
	r := rand.New(rand.NewPCG(5, 5))
	for _, tag := range []string{"q4k-p", "q4-g32-sym-p", "q4-g32-asym-p", "lpbq-b32-p", "w8-rows-p", "q6k-p"} {
		l, err := plan.ParseLayout(tag)
		if err != nil {
			b.Fatal(err)
		}
		p, err := l.Parts(N, K)
		if err != nil {
			b.Fatal(err)
		}
		data := make([]byte, p.Size)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		// finite scales: every float32 part a small value
		from := p.Scales
		if l.Kind == plan.LayoutQ4K {
			for rec := p.Scales; rec < p.Size; rec += 48 {
				for off := int64(32); off < 48; off += 4 {
					binary.LittleEndian.PutUint32(data[rec+off:], math.Float32bits(0.01))
				}
			}
			from = p.Size
		}
		for off := from; off < p.Size; off += 4 {
			binary.LittleEndian.PutUint32(data[off:], math.Float32bits(0.01))
		}
		if l.Kind == plan.LayoutLPBQ {
			for i := p.Codes; i < p.Scales; i++ {
				data[i] = 1 + data[i]%16
			}
		}
		qw, err := newQWeight(artifact.TensorInfo{Name: tag, DType: tensor.I8, Shape: []int64{N, K}, Layout: tag}, data)
		if err != nil {
			b.Fatal(err)
		}
		x := make([]float32, K)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		buf := newQ8Buf(K)
		buf.begin(1, K, true, true)
		buf.x.QuantizeRows(x, 0, 1)
		dst := make([]float32, N)
		job := linearJob{dst: dst, x: x, qw: qw, xq: &buf.x, T: 1, K: K, N: N}
		b.Run(tag, func(b *testing.B) {
			for range b.N {
				job.run(0, 0, N)
			}
		})
	}
}
