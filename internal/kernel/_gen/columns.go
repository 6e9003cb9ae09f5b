package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// genColumns emits the kernels of ColumnsF16: T rows of n float32 values
// (row t at src + t*ld) stored as n columns of binary16 values (column j
// at dst + j*stride), rounded to nearest even by VCVTPS2PH. A block of
// lanes rows is gathered column by column (VPGATHERDD with the row
// offsets idx[i] = i*ld), so the block's cache lines are read from L1
// once per column after the first, and each column gets lanes values in
// one store. The kernels cover blocks*lanes rows; Go stores the rest.
func genColumns() {
	for _, v := range []struct {
		name  string
		lanes int
		wide  bool
	}{{"columnsF16Avx2", 8, false}, {"columnsF16Vnni", 16, true}} {
		TEXT(v.name, NOSPLIT, "func(dst *uint16, src *float32, idx *int32, stride, ld, blocks, n int)")
		Pragma("noescape")
		Doc(v.name + " stores rows [0, blocks*lanes) of ColumnsF16 (idx holds i*ld, i < lanes; blocks, n >= 1).")
		dst := Load(Param("dst"), GP64())
		src := Load(Param("src"), GP64())
		idxp := Load(Param("idx"), GP64())
		stride := Load(Param("stride"), GP64())
		ld := Load(Param("ld"), GP64())
		blocks := Load(Param("blocks"), GP64())
		n := Load(Param("n"), GP64())
		SHLQ(Imm(1), stride) // bytes between columns
		// ld*lanes*4: bytes from one block of rows to the next
		SHLQ(Imm(uint64(map[int]int{8: 5, 16: 6}[v.lanes])), ld)
		var idx, x, mask VecVirtual
		var k Register
		if v.wide {
			idx, x = ZMM(), ZMM()
			VMOVDQU32(Mem{Base: idxp}, idx)
			k = K()
		} else {
			idx, x, mask = YMM(), YMM(), YMM()
			VMOVDQU(Mem{Base: idxp}, idx)
		}
		col, out, j := GP64(), GP64(), GP64()
		Label(v.name + "_block")
		MOVQ(src, col)
		MOVQ(dst, out)
		MOVQ(n, j)
		Label(v.name + "_col")
		if v.wide {
			KXNORW(k, k, k)
			VPGATHERDD(Mem{Base: col, Index: idx, Scale: 4}, k, x)
			VCVTPS2PH(Imm(0), x, Mem{Base: out})
		} else {
			VPCMPEQD(mask, mask, mask)
			VPGATHERDD(mask, Mem{Base: col, Index: idx, Scale: 4}, x)
			VCVTPS2PH(Imm(0), x, Mem{Base: out})
		}
		ADDQ(Imm(4), col)
		ADDQ(stride, out)
		DECQ(j)
		JNZ(LabelRef(v.name + "_col"))
		ADDQ(ld, src)
		ADDQ(Imm(uint64(2*v.lanes)), dst)
		DECQ(blocks)
		JNZ(LabelRef(v.name + "_block"))
		VZEROUPPER()
		RET()
	}
}

// genColumnsRow emits columnsF16Row, the store of one row (the rows left
// after the gathered blocks; decode stores one): 8 values converted at
// once by VCVTPS2PH and stored one per column (VPEXTRW), where Go
// converted them one by one.
func genColumnsRow() {
	TEXT("columnsF16Row", NOSPLIT, "func(dst *uint16, src *float32, stride, n int)")
	Pragma("noescape")
	Doc("columnsF16Row stores one row of n values (n a positive multiple of 8) of ColumnsF16: src[j] at dst[j*stride].")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	stride := Load(Param("stride"), GP64())
	n := Load(Param("n"), GP64())
	SHLQ(Imm(1), stride) // bytes between columns
	y, x := YMM(), XMM()
	Label("columnsF16Row_loop")
	VMOVUPS(Mem{Base: src}, y)
	VCVTPS2PH(Imm(0), y, x)
	for i := range 8 {
		VPEXTRW(Imm(uint64(i)), x, Mem{Base: dst})
		ADDQ(stride, dst)
	}
	ADDQ(Imm(32), src)
	SUBQ(Imm(8), n)
	JNZ(LabelRef("columnsF16Row_loop"))
	VZEROUPPER()
	RET()
}

// genRowF16 emits rowF16, ColumnsF16's row store when the columns are
// adjacent (stride 1: a row of a head-major cache, where decode stores
// one row of E values per key/value head): 8 values converted by one
// VCVTPS2PH and stored in one 16-byte store, where columnsF16Row stores
// them one by one.
func genRowF16() {
	TEXT("rowF16", NOSPLIT, "func(dst *uint16, src *float32, n int)")
	Pragma("noescape")
	Doc("rowF16 stores n values (n a positive multiple of 8) as binary16, rounded to nearest even: src[j] at dst[j].")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	y := YMM()
	Label("rowF16_loop")
	VMOVUPS(Mem{Base: src}, y)
	VCVTPS2PH(Imm(0), y, Mem{Base: dst})
	ADDQ(Imm(32), src)
	ADDQ(Imm(16), dst)
	SUBQ(Imm(8), n)
	JNZ(LabelRef("rowF16_loop"))
	VZEROUPPER()
	RET()
}
