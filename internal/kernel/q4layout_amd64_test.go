//go:build !purego

package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/aotlm/aotlm/internal/hugemem"
)

// BenchmarkQ4LayoutStreams times one token's 4-bit products over 64 MiB
// of LPBQ weights (K = 576, as the SmolLM2-135M shape's q, k, v, o, gate
// and up) cut into weights of 192, 576 and 1536 rows, called one weight
// after another as a decode step calls its linears, the weights laid out
// three ways, against a plain read of the same bytes; the variants run
// in turn within each iteration, so that the machine's drift falls on all
// of them alike:
//
//   - parts: each weight's nibbles, then its codes, the weights one after
//     another (as the artifact stores them, in the order a token reads
//     them): every call starts the codes' stream at a new place, and the
//     next weight's nibbles begin past the codes;
//   - pieces: the rows of one weight called in the same pieces (all the
//     nibbles, then all the codes): both streams go on from call to call;
//   - rows: each row's nibbles followed by its codes, one stream
//     (rstr = scstr = 17 bytes a block).
//
// It reports each variant's share of the plain read (read-share-*). On
// the AMD EPYC of docs/lab/benchmarks-2026.md: parts 0.67-0.70 at 192 rows,
// 0.79-0.85 at 576 and 0.87-0.94 at 1536; pieces and rows 0.95-1.0 at
// all three (docs/lab/kernels-notes.md, "What bounds the streamed products").
func BenchmarkQ4LayoutStreams(b *testing.B) {
	if !q4VnniSupported() {
		b.Skip("AVX-512 VNNI not available: the layouts are timed with its resident row loop")
	}
	const K, nb = 576, 576 / QK
	for _, rowsPer := range []int{192, 576, 1536} {
		b.Run(fmt.Sprintf("rows=%d", rowsPer), func(b *testing.B) {
			weights := (64 << 20) / (rowsPer * nb * 17)
			N := weights * rowsPer
			nibBytes, codeBytes := N*nb*16, N*nb
			// All buffers first, while the heap is fresh: memory the heap
			// reuses may stay in 4 KiB pages.
			nib, codes := hugemem.Bytes(nibBytes), hugemem.Bytes(codeBytes)
			parts := hugemem.Bytes(nibBytes + codeBytes + 64*weights)
			rows := hugemem.Bytes(nibBytes + codeBytes + 64)
			r := rand.New(rand.NewPCG(1, 2))
			w := randQ4(r, N, K, true, false)
			copy(nib, w.Nib)
			copy(codes, w.Codes)
			type view struct{ nib, codes []byte }
			var cut []view
			at := 0
			for i := range weights {
				v := view{nib: parts[at : at+rowsPer*nb*16]}
				copy(v.nib, nib[i*rowsPer*nb*16:])
				at += len(v.nib)
				v.codes = parts[at : at+rowsPer*nb]
				copy(v.codes, codes[i*rowsPer*nb:])
				at += len(v.codes) + 64
				cut = append(cut, v)
			}
			for n := range N {
				copy(rows[n*nb*17:], nib[n*nb*16:(n+1)*nb*16])
				copy(rows[n*nb*17+nb*16:], codes[n*nb:(n+1)*nb])
			}
			x, xf := randQ8(r, 1, K)
			x.Begin(1, true, false)
			x.QuantizeRows(xf, 0, 1)
			rec, sc := &x.recs.q4[0], &w.Scales[0]
			dst := make([]float32, rowsPer)
			k := q4VnniCodesResident[1][1]
			var sink uint64
			variants := []struct {
				name string
				run  func()
			}{
				{"read", func() { sink += layoutRead(nib) + layoutRead(codes) }},
				{"parts", func() {
					for _, v := range cut {
						k(&v.nib[0], nb*16, &v.codes[0], nb, nb/4, nb%4, rec, rowsPer, &dst[0], sc)
					}
				}},
				{"pieces", func() {
					for i := range weights {
						k(&nib[i*rowsPer*nb*16], nb*16, &codes[i*rowsPer*nb], nb, nb/4, nb%4, rec, rowsPer, &dst[0], sc)
					}
				}},
				{"rows", func() {
					for i := range weights {
						p := rows[i*rowsPer*nb*17:]
						k(&p[0], nb*17, &p[nb*16], nb*17, nb/4, nb%4, rec, rowsPer, &dst[0], sc)
					}
				}},
			}
			spent := make([]time.Duration, len(variants))
			i := 0
			for b.Loop() {
				for j := range variants {
					v := (i + j) % len(variants)
					t0 := time.Now()
					variants[v].run()
					spent[v] += time.Since(t0)
				}
				i++
			}
			for v := 1; v < len(variants); v++ {
				b.ReportMetric(spent[0].Seconds()/spent[v].Seconds(), "read-share-"+variants[v].name)
			}
			if sink == 1 {
				b.Log(sink)
			}
		})
	}
}

// layoutRead adds up b's 8-byte words (a plain read, four sums at a time).
func layoutRead(b []byte) uint64 {
	return sumWordsGeneric(unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8))
}
