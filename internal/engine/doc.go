// Package engine runs compiled artifacts. It knows no architecture: it
// opens an artifact (memory-mapped, manifest and plans validated, weights
// resolved and shape-checked once), and a Session executes the artifact's
// plans step by step over one activation arena, a static KV cache and a
// fixed pool of worker goroutines.
//
// Cache layout: for each of L layers, K and V hold Ctx rows of C floats
// (C = the plan's kv cols, G*E): K[l][p*C + g*E + e] is element e of key
// head g at position p. A pass at position pos writes rows pos..pos+v-1,
// where v is the number of valid (non-padding) rows of the pass; nothing is
// ever shifted.
//
// Prefill modes: ModeHybrid feeds a P-token prompt in ceil(P/N) passes of
// the AR-N plan, the last one padded, then decodes with the AR-1 plan;
// ModeKV feeds the prompt one token at a time through the AR-1 plan. A
// padded pass computes only its valid rows (padding rows are never
// computed, so they cannot reach the cache), and its last_row step picks
// row v-1, so the next-token logits are those of row (P-1) mod N of the
// last pass. Inside a pass the causal mask is a large finite negative
// (MaskValue, never -Inf) added to the scores of later positions.
//
// A uint8 cache (manifest kv_cache) holds bytes instead of floats, in the
// same layout: new rows are quantized when written, with the fixed scale
// of their layer and head, and every cached value is dequantized where
// attention reads it (kvu8.go).
//
// Kernels are plain Go loops with the definitions of the graph
// interpreter, summing in the same order, so an f32 artifact reproduces
// the interpreter's logits. Quantized weights (qweight.go, the layouts of
// plan.WeightLayout) are dequantized inside the linear and embed loops
// with the quant package's formulas, so they reproduce the interpreter
// over the dequantized weights exactly.
package engine
