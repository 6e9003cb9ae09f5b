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
// weights ahead of the loads puts those misses in flight early. On AMD
// Zen 4 the same prefetches cost 10-20% (its prefetchers already keep
// the stream ahead, and the extra loads compete for its load ports), so
// the loops are generated twice, with and without, and the tune probe
// picks (kernel.Tune).
//
// They ask twice for every line: into the second-level cache
// (PREFETCHT1) prefetchFar bytes ahead, and from there into the first
// (PREFETCHT0) prefetchNear bytes ahead. A PREFETCHT0 from memory holds
// one of the core's few first-level miss buffers for the whole trip to
// memory; the far request leaves that trip to the second-level cache,
// which keeps more in flight, and the near one then waits only for that
// cache (so the measurements suggest; the machine gave no counters). One
// PREFETCHT0 a line 4 KiB ahead (the loops until then) streamed a 4-bit
// weight at 0.82-0.86 of a plain read on the Xeon; the two requests
// 0.91-0.95 (docs/lab/kernels-notes.md, "Two requests a line").

// prefetchFar and prefetchNear are how far ahead in a row stream the
// prefetching loops ask for the weights: into the second-level cache,
// then into the first.
const (
	prefetchFar  = 16384
	prefetchNear = 4096
)

// prefetching: the row loop being generated asks for its weights ahead.
var prefetching bool

// prefetchSuffix is the name suffix of the row loop being generated.
func prefetchSuffix() string {
	if !prefetching {
		return ""
	}
	return "Pf"
}

// prefetchAt emits the two requests ahead of m in a stream of num bytes
// per den bytes of weights (a chunk's codes or scales are scBytes per 256
// bytes of nibbles): its distances are the weights' scaled so, which
// keeps every stream of a loop equally far ahead.
func prefetchAt(m Mem, num, den int) {
	far, near := m, m
	far.Disp += prefetchFar * num / den
	near.Disp += prefetchNear * num / den
	PREFETCHT1(far)
	PREFETCHT0(near)
}

// prefetchChunk emits, in a prefetching row loop, the requests for chunk
// c's lines (groups of 64 bytes of nibbles from nib + 256*c) and for its
// codes or scales (scBytes a chunk, from sc): LPBQ codes only with a
// row's first chunk.
func prefetchChunk(nib, sc Register, c, groups, scBytes int) {
	if !prefetching {
		return
	}
	for g := range groups {
		prefetchAt(Mem{Base: nib, Disp: 256*c + 64*g}, 1, 1)
	}
	if c > 0 && scBytes == 16 {
		// LPBQ: a resident row's codes (at most 40 bytes) lie within a
		// line or two, and the rows' requests, each at most 40 bytes
		// after the last, reach every line of the stream.
		return
	}
	prefetchAt(Mem{Base: sc, Disp: scBytes * c}, scBytes, 256)
}

// prefetchLines emits, in a prefetching row loop, the requests for the n
// lines from at.
func prefetchLines(at Mem, n int) {
	if !prefetching {
		return
	}
	for i := range n {
		m := at
		m.Disp += 64 * i
		prefetchAt(m, 1, 1)
	}
}

// genSumLines emits sumLines{Zmm,Ymm}[Pf]: the wrapping sum of the
// 64-bit words of lines*64 bytes at p (lines a positive multiple of 4),
// with or without asking for the lines ahead as the row loops do. They
// are the plain reads of the decode floor's probe (package bench): a read
// that keeps as many lines in flight as the machine allows, so that no
// product streams faster than the floor it is measured against.
func genSumLines() {
	for _, zmm := range []bool{true, false} {
		for _, ahead := range []bool{false, true} {
			name := "sumLinesYmm"
			if zmm {
				name = "sumLinesZmm"
			}
			if ahead {
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
				if ahead {
					prefetchAt(Mem{Base: p, Disp: 64 * l}, 1, 1)
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
