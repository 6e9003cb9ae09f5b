//go:build !purego

package kernel

import "golang.org/x/sys/cpu"

// archOverlays returns the arm64 overlays: "neon" with the ASIMD widening
// multiplies and float kernels every arm64 CPU has, then "dotprod" with
// SDOT, then "i8mm" with SMMLA tiles for the 4- and 8-bit prefill (decode
// stays on SDOT).
func archOverlays() []Overlay {
	o := []Overlay{
		{
			Name:       "neon",
			Supported:  true,
			BatchExact: true,
			QuantizeQ8: quantizeQ8Arm64,
			Q4MatMul:   q4MatMulNEON,
			W8MatMul:   w8MatMulNEON,
			Q6MatMul:   q6MatMulNEON,
			Dot:        dotArm64,
			Axpy:       axpyArm64,
			DotF16:     dotF16Arm64,
			AxpyF16:    axpyF16Arm64,
			// One NEON call per row (the dispatch has installed the
			// NEON Axpy and Dot by the time these run).
			AxpyRows:    axpyRowsByRow,
			DotRows:     dotRowsByRow,
			AxpyRowsF16: axpyRowsF16ByRow,
			DotRowsF16:  dotRowsF16ByRow,
			DotRowsF16W: dotRowsF16WByRow,
			AxpyRowsU8:  axpyRowsU8ByRow,
			DotRowsU8:   dotRowsU8ByRow,
			SiLU:        siluArm64,
			SiLUMul:     siluMulArm64,
			ExpSub:      expSubArm64,
			GELUTanh:    geluTanhArm64,
			Scale:       scaleArm64,
			Mul:         mulArm64,
			Add:         addArm64,
			ColumnsF16:  columnsF16Arm64,
		},
		{
			Name:       "dotprod",
			Supported:  cpu.ARM64.HasASIMDDP,
			BatchExact: true,
			Q4MatMul:   q4MatMulSDOT,
			W8MatMul:   w8MatMulSDOT,
			Q6MatMul:   q6MatMulSDOT,
		},
		{
			// SMMLA is FEAT_I8MM, which implies SDOT (ARMv8.6). Its
			// tiles sum a block of a (row, token) in one lane and
			// scale it once, where the SDOT kernels that take
			// single tokens scale four partial lanes: the same values
			// rounded apart, so not BatchExact.
			Name:      "i8mm",
			Supported: cpu.ARM64.HasI8MM && cpu.ARM64.HasASIMDDP,
			Q4MatMul:  q4MatMulI8MM,
			W8MatMul:  w8MatMulI8MM,
		},
	}
	return o // (i8mm sends the K4 form of Q4 to its SDOT kernels)
}

// decodeWalks: the arm64 products have one fixed walk (see Tune).
func decodeWalks() []int32 { return nil }
