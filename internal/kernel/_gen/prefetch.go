package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
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
