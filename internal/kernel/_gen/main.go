// Command _gen writes the amd64 assembly of package kernel with avo:
//
//	go run . -out ../kernel_amd64.s -stubs ../kernel_stub_amd64.go -pkg kernel
//
// (the package's go:generate line runs it). The generated files carry the
// !purego build tag, so `-tags purego` builds keep the generic kernels.
package main

import (
	. "github.com/mmcloughlin/avo/build"
)

func main() {
	ConstraintExpr("!purego")
	genConsts()
	genQ4()
	genQ4Lanes()
	genW8Lanes()
	genQuantize()
	genFloat()
	genW8()
	genAct()
	genRows()
	genRowsMulti()
	genScores()
	genPrefetch()
	genSumLines()
	genColumns()
	genColumnsRow()
	genRowF16()
	genDecayRows()
	genKVQ4()
	Generate()
}
