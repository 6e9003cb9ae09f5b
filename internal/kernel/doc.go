// Package kernel holds the arithmetic of the engine's hot loops: int8
// activation quantization, 4-bit and 8-bit weight x int8 activation
// matrix products for one token (decode) and for tiles of tokens
// (prefill), and the float32 dot products and updates of attention.
//
// Every operation has a generic Go version, always compiled and written
// as the reference loop of its doc comment. Per-ISA overlays (amd64 AVX2
// and AVX-512 VNNI assembly generated from _gen/, arm64 NEON with SDOT
// written by hand) replace it once at start when the CPU has the
// features; the purego build tag keeps the generic versions. Tests run
// every overlay the CPU supports against the generic version on random
// inputs.
//
// Dimension letters: N output rows of a weight, K inputs (a multiple of
// QK for the quantized kernels), T tokens of a tile, nb = K/QK blocks.
//
// The packed weight layouts are the same bytes on every ISA, so an
// artifact compiled on one machine runs on any other:
//
//	Q4  Nib [N][nb][16]byte   byte i of block b: u[32b+i] | u[32b+16+i]<<4,
//	                          u = 4-bit unsigned code of the weight
//	    w[n][k] = (u - z) * sc   z = 8 or Zeros[n*nb+b],
//	                             sc = float32(Codes[n*nb+b]) * Scales[n] (LPBQ)
//	                                or Scales[n*nb+b]
//	W8  U [N][K]uint8 = q + 128;  w[n][k] = float32(int(U)-128) * Scales[n]
//
// A binary16 weight is plain IEEE binary16 rows [N][K] with no scales:
// DotRowsF16W multiplies one such row with float32 activation rows,
// widening each element once (F16C or AVX-512 VCVTPH2PS, NEON FCVTL)
// and summing in float32.
package kernel
