// Package engine runs compiled artifacts. It knows no architecture: it
// opens an artifact (memory-mapped, manifest and plans validated, weights
// resolved and shape-checked once) with one pool of worker goroutines,
// and its Sessions execute the artifact's plans step by step over an
// activation arena and a static KV cache, one pass of one session at a
// time on the shared pool.
//
// Cache layout: for each of L layers, K and V are stored head-major,
// [G][slots][E]: key/value head g's slot p is the row of E values at
// (g*slots + p)*E, so the positions a head's row attends to are one
// contiguous run of rows, its scores dot products with the key rows
// (kernel.DotRows and its forms) and its outputs one update by the value
// rows (kernel.AxpyRows). A float32 cache holds floats, a binary16 one
// uint16, a uint8 one bytes with the fixed per-layer or per-head scales
// of the manifest's kv_cache (new rows are quantized when written;
// attention multiplies the scales in after the integer-coded sums). A
// session's whole cache is one buffer, advised for huge pages when a
// head's slots are short. Nothing is ever shifted.
//
// The general pass (Session.Run): up to N rows through the smallest plan
// of at least that many rows, each row with a token id, a position and a
// Mask of the earlier rows of the pass it may see on top of the committed
// cache. A pass's rows are written into the cache slots after the
// committed positions; a row whose mask hides a slot gets MaskValue there
// before the softmax's maximum and exactly 0 after it. Commit keeps a
// chain of the rows (copying each into its position), Rewind drops
// positions. The select_rows step copies the rows whose logits the pass
// wants to the top of its buffer, and the steps after it (final norm,
// classifier) run on those rows only; a pass that wants none stops there.
//
// Batched decode (Engine.DecodeBatch): the next token of each of up to N
// sessions as the rows of one pass, each at its own session's position.
// The row-wise and linear steps treat them as any pass's rows (so a
// weight is read once for all of them); the attention step stores row
// t's keys and values into session t's cache and attends it over that
// cache alone, as a one-row pass of that session would.
//
// Prefill modes: ModeHybrid feeds a P-token prompt in ceil(P/N) passes of
// the AR-N plan, the last one padded, then decodes with the AR-1 plan;
// ModeKV feeds the prompt one token at a time through the AR-1 plan. A
// padded pass computes only its valid rows, so padding never reaches the
// cache.
//
// Kernels: linear steps run the kernel package's products (float32, or
// int8 activations against packed 4- and 8-bit weights, quantized once per
// input and shared by the linears that read it), split by output rows
// across the workers; row-wise steps (norms, RoPE, elementwise) are split
// by rows and compute each row the same way whatever the split, so any
// thread count gives the same logits. An f32 artifact reproduces the graph
// interpreter within float32 summation-order differences.
package engine
