package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// genPrefetch emits prefetchStrided: PREFETCHT0 of the n cache lines at
// p, p+stride, ... (the slots of one position in the columns of a
// transposed KV cache, which decode stores into a layer later).
func genPrefetch() {
	TEXT("prefetchStrided", NOSPLIT, "func(p *byte, stride int, n int)")
	Pragma("noescape")
	Doc("prefetchStrided asks for the cache lines at p + i*stride, i < n (n >= 1), to be brought into the caches.")
	p := Load(Param("p"), GP64())
	stride := Load(Param("stride"), GP64())
	n := Load(Param("n"), GP64())
	Label("next")
	PREFETCHT0(Mem{Base: p})
	ADDQ(stride, p)
	DECQ(n)
	JNZ(LabelRef("next"))
	RET()
}

// Prefetching row loops. On Intel's server cores (Sapphire and Emerald
// Rapids) a one-token row loop streaming 4-bit weights from memory keeps
// too few misses in flight: its arithmetic fills the reorder window with
// a few lines' loads, and a single thread reads 7-9 GB/s of a weight
// where a plain read of the same memory reads 12-16. Asking for the
// weights prefetchBytes ahead of the loads (PREFETCHT0, one per line)
// puts those misses in flight early. On AMD Zen 4 the same prefetches
// cost 10-20% (its prefetchers already keep the stream ahead, and the
// extra loads compete for its load ports), so the loops are generated
// twice, with and without, and the tune probe picks (kernel.Tune).

// prefetchBytes is how far ahead in a row stream the prefetching loops
// ask for the weights.
const prefetchBytes = 4096

// prefetchAhead is the distance of the row loop being generated: 0 for
// none, else prefetchBytes.
var prefetchAhead int

// prefetchSuffix is the name suffix of the row loop being generated.
func prefetchSuffix() string {
	if prefetchAhead == 0 {
		return ""
	}
	return "Pf"
}

// prefetchChunk emits, in a prefetching row loop, the prefetches for
// chunk c's lines (groups of 64 bytes of nibbles from nib + 256*c) and,
// once per chunk, for its codes or scales (scBytes per whole chunk, from
// sc), each as far ahead in its own stream as the nibbles are: a chunk's
// scale bytes per 256 bytes of nibbles.
func prefetchChunk(nib, sc Register, c, groups, scBytes int) {
	if prefetchAhead == 0 {
		return
	}
	for g := range groups {
		PREFETCHT0(Mem{Base: nib, Disp: 256*c + 64*g + prefetchAhead})
	}
	PREFETCHT0(Mem{Base: sc, Disp: scBytes*c + prefetchAhead*scBytes/256})
}

// prefetchLines emits, in a prefetching row loop, the prefetches of the n
// lines from at, prefetchAhead bytes ahead.
func prefetchLines(at Mem, n int) {
	if prefetchAhead == 0 {
		return
	}
	for i := range n {
		m := at
		m.Disp += 64*i + prefetchAhead
		PREFETCHT0(m)
	}
}

// genSumLines emits sumLines{Zmm,Ymm}[Pf]: the wrapping sum of the
// 64-bit words of lines*64 bytes at p (lines a positive multiple of 4),
// with or without asking for the lines prefetchBytes ahead. They are the
// plain reads of the decode floor's probe (package bench): a read that
// keeps as many lines in flight as the machine allows, so that no
// product streams faster than the floor it is measured against.
func genSumLines() {
	for _, zmm := range []bool{true, false} {
		for _, ahead := range []int{0, prefetchBytes} {
			name := "sumLinesYmm"
			if zmm {
				name = "sumLinesZmm"
			}
			if ahead > 0 {
				name += "Pf"
			}
			TEXT(name, NOSPLIT, "func(p *byte, lines int) uint64")
			Pragma("noescape")
			Doc(name + " returns the wrapping sum of the 64-bit words of lines*64 bytes at p (lines a positive multiple of 4; see _gen/prefetch.go).")
			p := Load(Param("p"), GP64())
			n := Load(Param("lines"), GP64())
			SHRQ(U8(2), n)
			width := 32
			if zmm {
				width = 64
			}
			acc := make([]VecVirtual, 4)
			for i := range acc {
				if zmm {
					acc[i] = ZMM()
					VPXORQ(acc[i], acc[i], acc[i])
				} else {
					acc[i] = YMM()
					VPXOR(acc[i], acc[i], acc[i])
				}
			}
			Label("loop")
			for l := range 4 {
				if ahead > 0 {
					PREFETCHT0(Mem{Base: p, Disp: 64*l + ahead})
				}
				for o := 0; o < 64; o += width {
					i := (64*l + o) / width % 4
					VPADDQ(Mem{Base: p, Disp: 64*l + o}, acc[i], acc[i])
				}
			}
			ADDQ(U32(256), p)
			DECQ(n)
			JNZ(LabelRef("loop"))
			VPADDQ(acc[1], acc[0], acc[0])
			VPADDQ(acc[3], acc[2], acc[2])
			VPADDQ(acc[2], acc[0], acc[0])
			y, x := acc[0].AsY(), acc[0].AsX()
			if zmm {
				t := YMM()
				VEXTRACTI64X4(U8(1), acc[0], t)
				VPADDQ(t, y, y)
			}
			t := XMM()
			VEXTRACTI128(U8(1), y, t)
			VPADDQ(t, x, x)
			VPSHUFD(U8(0x4e), x, t)
			VPADDQ(t, x, x)
			r := GP64()
			VMOVQ(x, r)
			Store(r, ReturnIndex(0))
			VZEROUPPER()
			RET()
		}
	}
}
