// Package qdq runs a model's float graph with a quantization recipe's
// arithmetic simulated by quantize-dequantize ("QDQ", fake quantization),
// so the error each part of a recipe adds can be measured before, and
// apart from, compilation:
//
//   - weights: the dequantized values of a quantized folder (qmodel.Load);
//   - activations: the input of each linear the compiler packs for the
//     int8 kernels is rounded as the kernels round it (blocks of 32 along
//     the input, d = amax/127, q = round_half_even(x*127/amax)), or, for
//     the NPU simulation, to static per-tensor 16-bit ranges;
//   - the KV cache: keys and values entering attention are rounded to the
//     uint8 cache's per-layer, per-head scales (quant.KVQuant), calibrated
//     as the compiler calibrates them.
//
// Session implements eval.Session over the graph interpreter.
package qdq
