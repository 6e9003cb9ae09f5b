// Package tensor owns the element types aotlm stores weights and activations in
// (f32, f16, bf16, int8, uint8 and quantized blocks), their sizes, and the
// scalar conversions between the 16-bit float formats and float32.
//
// Shapes throughout aotlm are written outermost dimension first, as PyTorch and
// safetensors write them: a linear weight mapping K inputs to N outputs has
// shape [N, K] and is stored row-major, one output row of K values after another.
// GGUF lists dimensions innermost first; its reader reverses them.
package tensor
