// Package qmodel writes and reads aotlm's quantized model folders: what
// `aotlm quantize` produces and `aotlm compile` (and, dequantized, `run` and
// `ppl`) consume.
//
// A folder holds:
//
//	aotlm-quant.json   the manifest: format version, the model config
//	                   (arch.Config), the recipe, the source, and one entry per
//	                   tensor {scheme, rows, cols, padded, stored names}
//	model.safetensors  the tensors under canonical (Hugging Face) names. A
//	                   tensor kept in float is stored under its own name (F32,
//	                   or F16 for the f16 scheme). A quantized one is stored
//	                   as parts:
//	                     <name>.q       I8 [rows, cols]   one integer per weight
//	                     <name>.scales  F32 [...]         per row (w8, lpbq) or per group (q4)
//	                     <name>.codes   U8 [rows, blocks] LPBQ block codes (1..16)
//	                     <name>.zeros   F32 [...]         q4 asymmetric zero points
//	tokenizer files    copied from the source: tokenizer.json and friends,
//	                   tokenizer.model, tokenizer.bin, or tokenizer.gguf (a
//	                   vocabulary-only GGUF holding the source's tokenizer.*
//	                   metadata and chat template)
//
// Dequantization rules are those of internal/quant; integers are stored
// unpacked, packing for the kernels happens at compile time. The folder is
// written beside its destination and renamed into place, so a failed run
// never leaves a partial folder.
package qmodel
