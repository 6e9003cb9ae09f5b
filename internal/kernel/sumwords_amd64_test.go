//go:build !purego

package kernel

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// TestSumLinesKernels: each line-sum kernel this CPU runs (AVX-512 and
// AVX2, with and without prefetching) gives the wrapping sum of the plain
// loop on 4 to 128 lines from unaligned starts, whichever SumWords picks.
func TestSumLinesKernels(t *testing.T) {
	kernels := map[string]func(p *byte, lines int) uint64{}
	if cpu.X86.HasAVX512F {
		kernels["zmm"], kernels["zmm-pf"] = sumLinesZmm, sumLinesZmmPf
	}
	if cpu.X86.HasAVX2 {
		kernels["ymm"], kernels["ymm-pf"] = sumLinesYmm, sumLinesYmmPf
	}
	if len(kernels) == 0 {
		t.Logf("no AVX2 or AVX-512: SumWords sums in Go here")
		return
	}
	r := rand.New(rand.NewPCG(93, 94))
	buf := make([]uint64, 128*8+16)
	for i := range buf {
		buf[i] = r.Uint64()
	}
	for name, k := range kernels {
		for lines := 4; lines <= 128; lines += 4 {
			for _, at := range []int{0, 1, 7} {
				w := buf[at : at+8*lines]
				if got, want := k((*byte)(unsafe.Pointer(&w[0])), lines), sumWordsGeneric(w); got != want {
					t.Fatalf("%s, %d lines from word %d: %#x, want %#x", name, lines, at, got, want)
				}
			}
		}
	}
}
