// Package gguf reads and writes GGUF files, the single-file checkpoint format
// of ggml and llama.cpp. It reads versions 2 and 3 and writes version 3.
//
// Byte layout (all integers little-endian):
//
//	magic        [4]byte  "GGUF"
//	version      u32      2 or 3 (1 used 32-bit counts and is refused)
//	tensor_count u64
//	kv_count     u64
//	kv[kv_count]:
//	    key        string
//	    value_type u32      one of the 13 value types below
//	    value      scalar | string | array
//	tensor_info[tensor_count]:
//	    name       string
//	    n_dims     u32      at most 4
//	    ne[n_dims] u64      innermost (fastest varying) dimension first
//	    type       u32      ggml type (F32=0, F16=1, Q4_0=2, Q8_0=8, BF16=30, ...)
//	    offset     u64      relative to the data section, a multiple of the alignment
//	padding to a multiple of the alignment
//	data section: tensor data, each tensor starting at a multiple of the alignment
//
//	string = len u64, len bytes of UTF-8 (no terminator)
//	array  = elem_type u32, count u64, count values of elem_type (arrays nest)
//
// Value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool (one
// byte, 0 or 1), 8 string, 9 array, 10 u64, 11 i64, 12 f64. The alignment is
// the u32 key "general.alignment" (a power of two), 32 when absent.
//
// Shapes: ggml lists dimensions innermost first; this package reverses them, so
// TensorInfo.Shape is outermost first (PyTorch order) and a ggml weight with
// ne = [in, out] is reported as [out, in]. A row (the innermost dimension) must
// hold a whole number of quantization blocks.
//
// Block formats read here (32 values per block):
//
//	Q8_0: d f16, q [32]int8         x[i] = d * q[i]
//	Q4_0: d f16, qs [16]byte        x[j] = d * (qs[j]&15 - 8), x[j+16] = d * (qs[j]>>4 - 8)
//
// and, dequantized to float32 by kquant.go, Q4_1, Q5_0, Q5_1, IQ4_NL,
// MXFP4 (32 values) and the 256-value super-blocks Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K, Q8_K and IQ4_XS (layouts in each function's comment).
//
// Open maps the file into memory where the platform allows it (Linux, Android,
// Darwin, the BSDs) and reads through the file otherwise. Every header field is
// validated at open time: lengths and counts against the bytes left, duplicate
// keys and tensor names, dimension overflow, alignment, tensor bounds and
// overlaps. Malformed input yields a *format.Error naming the field; valid but
// unhandled input (version 1, big-endian files, tensor types without a float32
// decoder) a *format.UnsupportedError.
package gguf
