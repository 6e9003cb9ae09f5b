// Package quant owns the reference weight and KV-cache quantization schemes of
// aotlm and the JSON recipes that choose a scheme per tensor. It works on plain
// float32 matrices and knows nothing about files or models: the quantize and
// compile steps hand it one weight at a time and store what it returns.
//
// Dimension letters, used throughout:
//
//	N  output channels (rows of a linear weight)
//	K  inputs (columns); a weight W is [N, K], row-major, one output row after another
//	B  LPBQ block size along K (16, 32, 64 or 128)
//	G  q4 group size along K
//	H  KV heads, D head dimension; a K or V cache row is [H, D]
//
// Schemes, one file each:
//
//	lpbq.go  LPBQ W4: int4 values in -7..7, a 4-bit block code k in 1..16 per
//	         B inputs and one float scale S per row; w' = q*k*S
//	w8.go    W8: int8 in -127..127, one scale per row; w' = q*s
//	q4.go    group-wise 4-bit, symmetric or min/max with a zero point, with
//	         optional HQQ refinement (hqq.go)
//	kvu8.go  uint8 KV cache, symmetric around zero point 128, per tensor or per head
//	f16.go   f16 storage (round-to-nearest-even through internal/tensor)
//
// All rounding of values to integers is round-half-to-even, as torch.round and
// numpy.round do in the tools these schemes come from. Scale arithmetic is done
// in float64 from the float32 inputs, then stored as float32; every formula is
// spelled out on the function that applies it, so that another implementation
// can reproduce the result bit for bit.
//
// recipe.go reads recipes (JSON) and preset.go names the built-in ones;
// Recipe.SchemeFor maps a tensor name to its scheme.
package quant
