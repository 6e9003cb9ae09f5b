// Package plan owns the contract between the compiler and the engine: the
// artifact manifest schema and the execution plan, a static, architecture-free
// program for one fixed pass length N (the "AR length").
//
// A plan is a list of steps over float32 buffers that all live in one arena.
// Each buffer is a [rows, cols] row-major matrix at a fixed float offset of
// the arena; rows is N, or 1 after a last_row step. Each step reads its input
// buffers and the weights it names, and writes its output buffer:
//
//	embed      out[t] = w[ids[t]]                  w [V, D], no input buffer
//	linear     out[t][n] = sum_k x[t][k]*w[n][k] (+ b[n])   w [N, K], b [N]
//	rms_norm   out[t][c] = x[t][c] / sqrt(mean(x[t]^2) + eps) * (w[c] + offset)
//	head_rms_norm  rms_norm of each head_dim-wide head of a row on its own,
//	           out[t][h*E+e] = x[t][h*E+e] / sqrt(mean_e(head^2) + eps) * (w[e] + offset),
//	           w [E] shared by the heads
//	add, mul   out = x + y, x * y (elementwise)
//	scale      out = x * scale
//	silu       out = x * sigmoid(x)
//	gelu_tanh  out = 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))
//	rope       rotate each head of row t by position pos+t (cos, sin times scale)
//	attention  write k, v rows into the KV cache layer, then causal
//	           grouped-query attention of q over the cache
//	columns    out[t] = x[t][lo:hi]; with group g, that range of each
//	           g-wide block of x[t] in turn (per-head parts of a projection)
//	last_row   out[0] = x[valid-1]: the last VALID row of the pass
//	layer_norm out[t][c] = (x[t][c] - mean(x[t])) / sqrt(var(x[t]) + eps) * w[c] + b[c]
//	sub        out = x - y
//	mix        out[t][c] = x[t][c] + (y[t][c] - x[t][c]) * w[c]
//	sigmoid, tanh, relu   elementwise
//	token_shift out[0] = S, out[t] = x[t-1], then S = x[valid-1]   (state slot S [C])
//	wkv7       RWKV-7's time mix over r, w, k, v, a with a [H, E, E] state
//	           slot, weights k_k, k_a, r_k, gn_w, gn_b (defined in the graph package)
//	causal_conv  depthwise causal convolution over time, w [C, K] (K in
//	           head_dim), state slot of the last K-1 input rows
//	gated_delta  the gated delta rule of a Gated DeltaNet layer over
//	           x = [q | k | v], a, b [N, Hv], weights A, dt_bias [Hv], a
//	           [Hv, Dk, Dv] state slot (sizes in delta; op/deltanet.go)
//	rows       out = the pass's input rows (a vision plan's patches)
//	group_rows out[i] = x[g*i] | ... | x[g*i+g-1]: N/g rows of g*C (group g)
//
// A vision plan (an image encoder, listed under the manifest's "vision"
// and stored as blob "plan/vision/<h>x<w>", see VisionPlanName) has no
// cache layers: its attention steps are bidirectional (every row sees
// every row of the pass, no cache, no padding), its embed steps read a
// position table by the ids the caller gives, and a pass always holds
// exactly its rows.
//
// token_shift, wkv7, causal_conv and gated_delta are recurrent: each owns
// a slot of the plan's State, which a session keeps from one pass to the
// next and zeroes on reset; they process the valid rows in order and never read or update
// the state from padding rows.
//
// The op definitions are those of the graph interpreter, with one
// addition: a pass may be padded, carrying only valid <= N real rows. Rows
// at or past valid never enter the KV cache and never influence valid rows,
// and last_row selects row valid-1, so a padded AR-N pass yields the logits
// of its last real token (row (P-1) mod N of the last pass of a P-token
// prompt).
//
// Weights are float32 or, for embed and linear, one of the quantized
// layouts of WeightLayout (layout.go), which dequantize to float32 by the
// rules written there. The KV cache is float32 or, when the manifest has
// a kv_cache, uint8 with fixed per-layer, per-head scales (KVCache).
//
// Plans are JSON (stored as artifact blobs "plan/arN"); the manifest, also
// JSON, lists them. Validate checks every id, offset, size and shape of a
// decoded plan, so an engine that runs only validated plans cannot index
// out of bounds.
package plan
