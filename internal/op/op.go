// Package op is the one definition of the operations aotlm computes: the
// op codes, their names (the JSON form in plans), their input and weight
// counts, and the reference math of the recurrent ops. The graph, the
// plan, the compiler and the engine all use these values, so an op is
// added or renamed in one place.
//
// Shapes: a pass has T rows; x is input 0, y input 1, w and b weights.
//
//	tokens       the graph input: T token ids (graphs only, never a plan step)
//	embed        out[t] = w[ids[t]]                            w [V, D]
//	linear       out[t][n] = sum_k x[t][k]*w[n][k] (+ b[n])    w [N, K], b [N]
//	rms_norm     out[t][c] = x[t][c] / sqrt(mean(x[t]^2) + eps) * (w[c] + offset)
//	add, mul     out = x + y, x * y (elementwise)
//	scale        out = x * scale
//	silu         out = x * sigmoid(x)
//	gelu_tanh    out = 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))
//	gelu_f16     gelu_tanh as llama.cpp's CPU backend computes it: x rounded
//	             to binary16 and looked up in a table of binary16 results;
//	             0 for x <= -10, x for x >= 10 (kernel.GELUF16)
//	rope         rotate each head of row t by the row's position
//	attention    write the rows' k, v into the cache, then grouped-query
//	             attention of each row's q over the cache positions it may
//	             see (causal, a sliding window, or a tree mask in a pass)
//	columns      out[t] = x[t][lo:hi]; with a group g, the range of each
//	             g-wide block in turn: x[t][lo:hi] | x[t][g+lo:g+hi] | ...
//	select_rows  out[i] = x[rows[i]]: the rows whose logits a pass wants
//	             (in a graph: the last row); "last_row" is its old name
//	head_rms_norm  rms_norm of each head_dim-wide head of a row on its own
//	layer_norm   out[t][c] = (x[t][c] - mean(x[t])) / sqrt(var(x[t]) + eps) * w[c] + b[c]
//	token_shift  out[0] = S, out[t] = x[t-1], then S = x[T-1]   (state S [C])
//	mix          out[t][c] = x[t][c] + (y[t][c] - x[t][c]) * w[c]
//	sub          out = x - y
//	sigmoid, tanh, relu   elementwise
//	wkv7         RWKV-7's time mix (WKV7), with a [H, E, E] state
//	rows         an input of T rows of floats: the pixel patches of a vision
//	             encoder (a graph input; in a plan, the step that copies the
//	             pass's input rows into its buffer)
//	group_rows   out[i] = x[s+k*i] | x[s+k*i+1] | ... | x[s+k*i+k-1]: (T-s)/k
//	             rows of k*C columns (a vision connector's pixel shuffle, with
//	             the patches fed in block order); the first s rows (lo, a
//	             class token) are dropped
//	hadamard     out[t] = x[t] B, B = blockdiag(H_P, ..., H_P) / sqrt(P) with
//	             H_P the Sylvester Hadamard matrix of order P (a power of
//	             two dividing C): an online rotation (QuaRot's R3, R4)
//	gather_cols  out[t][i] = x[t][idx[i]]: the outlier channels of a linear's
//	             input, which a float linear reads
//	zero_cols    out[t] = x[t] with the columns idx set to 0: the input the
//	             int8 linear reads once its outlier channels are taken out
//	causal_conv  out[t][c] = sum_j w[c][j] * x[t-K+1+j][c]: a depthwise causal
//	             convolution over time, w [C, K], with a state of the last
//	             K-1 input rows (causalconv.go); an optional bias b [C]
//	             is added to each output row
//	shared_attention  attention of q over another layer's cache slot,
//	             written earlier in the pass, storing nothing (Gemma 4's
//	             shared key/value layers)
//	ssm_scan     Mamba2's selective scan over x, dt, B, C with weights A, D,
//	             dt_bias [H] and a [H, P, N] state (mamba2.go)
//	gated_delta  the gated delta rule of a Gated DeltaNet layer over x = [q | k | v],
//	             a and b, with weights A, dt_bias [Hv] and a [Hv, Dk, Dv] state
//	             (deltanet.go)
//
// scale may take a weight w [1]: out = x * scale * w[0] (a learned
// per-layer scalar); head_rms_norm may take none: a gain of 1 + offset.
package op

import (
	"encoding/json"
	"fmt"
)

// Op is what a graph node or a plan step computes. Its JSON form is its
// name.
type Op uint8

// The ops, in the order of their codes.
const (
	Invalid Op = iota
	Tokens
	Embed
	Linear
	RMSNorm
	Add
	Mul
	Scale
	SiLU
	GELUTanh
	RoPE
	Attention
	Columns
	SelectRows
	HeadRMSNorm
	LayerNorm
	TokenShift
	Mix
	Sub
	Sigmoid
	Tanh
	ReLU
	WKV7
	Rows
	GroupRows
	Hadamard
	GatherCols
	ZeroCols
	CausalConv
	SharedAttention
	SSMScan
	GatedDelta
	GELUF16
	// Count is the number of op codes.
	Count
)

var names = [Count]string{
	Invalid: "invalid", Tokens: "tokens", Embed: "embed", Linear: "linear", RMSNorm: "rms_norm",
	Add: "add", Mul: "mul", Scale: "scale", SiLU: "silu", GELUTanh: "gelu_tanh", RoPE: "rope",
	Attention: "attention", Columns: "columns", SelectRows: "select_rows",
	HeadRMSNorm: "head_rms_norm", LayerNorm: "layer_norm", TokenShift: "token_shift", Mix: "mix",
	Sub: "sub", Sigmoid: "sigmoid", Tanh: "tanh", ReLU: "relu", WKV7: "wkv7",
	Rows: "rows", GroupRows: "group_rows", Hadamard: "hadamard",
	GatherCols: "gather_cols", ZeroCols: "zero_cols",
	CausalConv: "causal_conv", SharedAttention: "shared_attention", SSMScan: "ssm_scan",
	GatedDelta: "gated_delta", GELUF16: "gelu_f16",
}

// aliases are former names still accepted when decoding.
var aliases = map[string]Op{"last_row": SelectRows}

// String returns the op's name.
func (o Op) String() string {
	if o < Count {
		return names[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Parse returns the op with the given name (or a former name).
func Parse(name string) (Op, bool) {
	for i, n := range names {
		if n == name && Op(i) != Invalid {
			return Op(i), true
		}
	}
	o, ok := aliases[name]
	return o, ok
}

// MarshalJSON encodes the op as its name.
func (o Op) MarshalJSON() ([]byte, error) {
	if o == Invalid || o >= Count {
		return nil, fmt.Errorf("op: cannot encode %v", o)
	}
	return json.Marshal(o.String())
}

// UnmarshalJSON decodes an op name; an unknown name is an error.
func (o *Op) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("op: %w", err)
	}
	v, ok := Parse(s)
	if !ok {
		return fmt.Errorf("unknown op %q", s)
	}
	*o = v
	return nil
}

// Arity is how many inputs and weights (at least, at most) an op takes.
type Arity struct{ In, WMin, WMax int }

var arity = [Count]Arity{
	Embed: {0, 1, 1}, Linear: {1, 1, 2}, RMSNorm: {1, 1, 1}, Add: {2, 0, 0},
	Mul: {2, 0, 0}, Scale: {1, 0, 1}, SiLU: {1, 0, 0}, GELUTanh: {1, 0, 0},
	RoPE: {1, 0, 0}, Attention: {3, 0, 0}, Columns: {1, 0, 0}, SelectRows: {1, 0, 0},
	HeadRMSNorm: {1, 0, 1}, LayerNorm: {1, 2, 2}, TokenShift: {1, 0, 0}, Mix: {2, 1, 1},
	Sub: {2, 0, 0}, Sigmoid: {1, 0, 0}, Tanh: {1, 0, 0}, ReLU: {1, 0, 0}, WKV7: {5, 5, 5},
	GroupRows: {1, 0, 0}, Hadamard: {1, 0, 0}, GatherCols: {1, 0, 0}, ZeroCols: {1, 0, 0},
	CausalConv: {1, 1, 2}, SharedAttention: {1, 0, 0}, SSMScan: {4, 3, 3}, GatedDelta: {3, 2, 2},
	GELUF16: {1, 0, 0},
}

// Arity returns the op's input and weight counts (zero for Invalid and
// Tokens, which are not steps, and for Rows, which reads the pass's input).
func (o Op) Arity() Arity {
	if o < Count {
		return arity[o]
	}
	return Arity{}
}

// Recurrent reports whether the op belongs to the recurrent set RWKV-7,
// LFM2, Granite 4 hybrid and Gated DeltaNet are built from (run by the
// recurrent part of an executor).
func (o Op) Recurrent() bool {
	switch o {
	case LayerNorm, TokenShift, Mix, Sub, Sigmoid, Tanh, ReLU, WKV7, CausalConv, SSMScan, GatedDelta:
		return true
	}
	return false
}

// Stateful reports whether the op carries a state slot across passes.
func (o Op) Stateful() bool {
	switch o {
	case TokenShift, WKV7, CausalConv, SSMScan, GatedDelta:
		return true
	}
	return false
}
