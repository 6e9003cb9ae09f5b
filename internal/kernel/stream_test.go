package kernel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/aotlm/aotlm/internal/hugemem"
)

// streamBytes is the size of each weight BenchmarkDecodeStream streams:
// larger than any cache it may meet (this Xeon's third level is 260 MiB).
const streamBytes = 320 << 20

// BenchmarkDecodeStream times the one-token products of weights larger
// than the caches, in advised huge pages, under the walk the engine would
// take (TuneOnce: the cached choice for this CPU, or $AOTLM_KERNEL_TUNE),
// against a plain read of as many bytes (kernel.SumWords without
// asking ahead), on 1 and 2 threads. The products and the reads take
// turns round by round, so that the machine's drifting bandwidth falls on
// all alike; it reports each product's median share of the read of its
// round (share-<weight>) and the read with the lines asked for ahead
// (share-read-ahead). This is the share of the decode floor a product
// alone can reach (docs/lab/kernels-notes.md, "Two requests a line"). Run with
// -benchtime 1x; it allocates about 2 GB.
func BenchmarkDecodeStream(b *testing.B) {
	r := rand.New(rand.NewPCG(71, 72))
	type prod struct {
		name  string
		N     int
		bytes float64
		run   func(n0, n1 int)
	}
	var prods []prod
	for _, K := range []int{576, 1024} {
		N := streamBytes / (K/2 + K/QK) / 4 * 4
		q := &Q4{N: N, K: K, Nib: hugemem.Bytes(N * K / 2), Codes: hugemem.Bytes(N * K / QK), Scales: make([]float32, N)}
		fillBytes(r, q.Nib, 0)
		fillBytes(r, q.Codes, 1)
		for i := range q.Scales {
			q.Scales[i] = 0.001 + r.Float32()*0.01
		}
		x, _ := randQ8(r, 1, K)
		dst := make([]float32, N)
		prods = append(prods, prod{fmt.Sprintf("q4-K%d", K), N, float64(len(q.Nib) + len(q.Codes)),
			func(n0, n1 int) { q.MatMul(dst, N, x, n0, n1) }})
	}
	for _, K := range []int{576, 1024} {
		N := streamBytes / K / 4 * 4
		w := &W8{N: N, K: K, U: hugemem.Bytes(N * K), Scales: make([]float32, N)}
		fillBytes(r, w.U, 1)
		for i := range w.Scales {
			w.Scales[i] = 0.001 + r.Float32()*0.01
		}
		x, _ := randQ8(r, 1, K)
		dst := make([]float32, N)
		prods = append(prods, prod{fmt.Sprintf("w8-K%d", K), N, float64(len(w.U)),
			func(n0, n1 int) { w.MatMul(dst, N, x, n0, n1) }})
	}
	{
		const K = 1024
		N := streamBytes / (K/2 + K/4 + K/Q6Group + 4*K/Q6Super) / 4 * 4
		w := &Q6{N: N, K: K, Nib: hugemem.Bytes(N * K / 2), Hi: hugemem.Bytes(N * K / 4),
			Sub: make([]int8, N*K/Q6Group), D: make([]float32, N*K/Q6Super)}
		fillBytes(r, w.Nib, 0)
		fillBytes(r, w.Hi, 0)
		for i := range w.Sub {
			w.Sub[i] = int8(r.IntN(256) - 128)
		}
		for i := range w.D {
			w.D[i] = (0.5 + r.Float32()) * 1e-4
		}
		x, _ := randQ8(r, 1, K)
		dst := make([]float32, N)
		prods = append(prods, prod{"q6-K1024", N, float64(len(w.Nib) + len(w.Hi) + len(w.Sub) + 4*len(w.D)),
			func(n0, n1 int) { w.MatMul(dst, N, x, n0, n1) }})
	}
	raw := hugemem.Bytes(streamBytes)
	fillBytes(r, raw, 0)
	words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(raw))), len(raw)/8)
	lines := len(words) / 8
	for _, ahead := range []bool{false, true} {
		prods = append(prods, prod{map[bool]string{false: "read", true: "read-ahead"}[ahead], lines, float64(len(raw)),
			func(n0, n1 int) { SumWords(words[8*n0:8*n1], ahead) }})
	}
	saved := decodeWalk.Load()
	defer decodeWalk.Store(saved)
	if _, err := TuneOnce(); err != nil {
		b.Fatal(err)
	}
	b.Logf("decode walk %s", DecodeWalk())
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			rates := make([][]float64, len(prods))
			for b.Loop() {
				for round := range 10 {
					for i, p := range prods {
						start := time.Now()
						if threads == 1 {
							p.run(0, p.N)
						} else {
							inHalves(p.N, p.run)
						}
						if round > 0 { // the first is a warm-up
							rates[i] = append(rates[i], p.bytes/time.Since(start).Seconds())
						}
					}
				}
			}
			read := rates[len(prods)-2]
			for i, p := range prods {
				if p.name == "read" {
					continue
				}
				share := make([]float64, len(read))
				for j := range read {
					share[j] = rates[i][j] / read[j]
				}
				slices.Sort(share)
				b.ReportMetric(share[len(share)/2], "share-"+p.name)
			}
			slices.Sort(read)
			b.ReportMetric(read[len(read)/2]/1e9, "GB/s-read")
		})
	}
}

// fillBytes fills p with random bytes, each at least low.
func fillBytes(r *rand.Rand, p []byte, low byte) {
	for i := range p {
		p[i] = max(byte(r.Uint32()), low)
	}
}
