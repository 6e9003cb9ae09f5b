package plan

import (
	"encoding/json"
	"fmt"
)

// Version is the plan encoding this package reads and writes.
const Version = 1

// Op is what a step computes. Its JSON form is the op name.
type Op uint8

// The ops; see the package comment for their definitions.
const (
	OpInvalid Op = iota
	OpEmbed
	OpLinear
	OpRMSNorm
	OpAdd
	OpMul
	OpScale
	OpSiLU
	OpGELUTanh
	OpRoPE
	OpAttention
	OpColumns
	OpLastRow
	OpHeadRMSNorm
	OpLayerNorm
	OpTokenShift
	OpMix
	OpSub
	OpSigmoid
	OpTanh
	OpReLU
	OpWKV7
	numOps
)

var opNames = [numOps]string{
	OpInvalid: "invalid", OpEmbed: "embed", OpLinear: "linear", OpRMSNorm: "rms_norm",
	OpAdd: "add", OpMul: "mul", OpScale: "scale", OpSiLU: "silu", OpGELUTanh: "gelu_tanh",
	OpRoPE: "rope", OpAttention: "attention", OpColumns: "columns", OpLastRow: "last_row",
	OpHeadRMSNorm: "head_rms_norm", OpLayerNorm: "layer_norm", OpTokenShift: "token_shift",
	OpMix: "mix", OpSub: "sub", OpSigmoid: "sigmoid", OpTanh: "tanh", OpReLU: "relu", OpWKV7: "wkv7",
}

// String returns the op's name.
func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// ParseOp returns the op with the given name.
func ParseOp(name string) (Op, bool) {
	for i, n := range opNames {
		if n == name && Op(i) != OpInvalid {
			return Op(i), true
		}
	}
	return OpInvalid, false
}

// MarshalJSON encodes the op as its name.
func (o Op) MarshalJSON() ([]byte, error) {
	if o == OpInvalid || o >= numOps {
		return nil, fmt.Errorf("plan: cannot encode %v", o)
	}
	return json.Marshal(o.String())
}

// UnmarshalJSON decodes an op name; an unknown name is an error.
func (o *Op) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("op: %w", err)
	}
	op, ok := ParseOp(s)
	if !ok {
		return fmt.Errorf("unknown op %q", s)
	}
	*o = op
	return nil
}

// Plan is a static program for passes of Rows tokens.
type Plan struct {
	Version int      `json:"version"`
	Rows    int      `json:"rows"`  // N, the AR length: tokens per pass
	Arena   int      `json:"arena"` // floats in the activation arena
	Buffers []Buffer `json:"buffers"`
	Steps   []Step   `json:"steps"`
	Output  int      `json:"output"` // buffer id of the logits
	KV      KV       `json:"kv"`
	// State holds the size in floats of each recurrent state slot, which
	// a session keeps across passes (zero at position 0): token_shift and
	// wkv7 steps each own one.
	State []int `json:"state,omitempty"`
}

// Buffer is a [Rows, Cols] row-major float32 matrix at Offset floats into
// the arena. A buffer's id is its index in Plan.Buffers.
type Buffer struct {
	Rows   int `json:"rows"`
	Cols   int `json:"cols"`
	Offset int `json:"offset"`
}

// Size returns Rows*Cols.
func (b Buffer) Size() int { return b.Rows * b.Cols }

// KV is the layout of the static attention cache the plan writes: Layers
// slots of Ctx rows of Cols floats each, for keys and for values.
type KV struct {
	Layers int `json:"layers"`
	Cols   int `json:"cols"`
	Ctx    int `json:"ctx"`
}

// Step is one op: it reads buffers In and weights Weights (w, then the
// optional bias b of a linear), and writes buffer Out.
type Step struct {
	Op      Op       `json:"op"`
	In      []int    `json:"in,omitempty"`
	Out     int      `json:"out"`
	Weights []string `json:"weights,omitempty"`
	Name    string   `json:"name,omitempty"` // a label for errors and dumps

	Eps     float32 `json:"eps,omitempty"`      // rms_norm, head_rms_norm
	Offset  float32 `json:"offset,omitempty"`   // rms_norm, head_rms_norm gain offset
	Scale   float32 `json:"scale,omitempty"`    // scale
	Lo      int     `json:"lo,omitempty"`       // columns
	Hi      int     `json:"hi,omitempty"`       // columns
	HeadDim int     `json:"head_dim,omitempty"` // head_rms_norm, wkv7: E
	Slot    int     `json:"slot,omitempty"`     // token_shift, wkv7: state slot
	Rope    *Rope   `json:"rope,omitempty"`
	Attn    *Attn   `json:"attn,omitempty"`
}

// Rope configures a rope step: pair i of a head at position p rotates by
// p*InvFreq[i]; pairs are (2i, 2i+1) when Half is false, (i, i+RotDim/2)
// when it is true. Dimensions RotDim..HeadDim-1 pass through. Scale, when
// present, multiplies cos and sin (longrope's attention factor); absent
// (0) means 1.
type Rope struct {
	Half    bool      `json:"half"`
	HeadDim int       `json:"head_dim"`
	RotDim  int       `json:"rot_dim"`
	InvFreq []float64 `json:"inv_freq"`
	Scale   float64   `json:"scale,omitempty"`
}

// Attn configures an attention step: Heads query heads and KVHeads
// key/value heads of HeadDim, cache slot Layer, scores scaled by Scale and
// limited to the last Window positions when Window > 0.
type Attn struct {
	Layer   int     `json:"layer"`
	Heads   int     `json:"heads"`
	KVHeads int     `json:"kv_heads"`
	HeadDim int     `json:"head_dim"`
	Scale   float32 `json:"scale"`
	Window  int     `json:"window,omitempty"`
}

// Encode returns the plan's JSON.
func (p *Plan) Encode() ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("plan: encoding: %w", err)
	}
	return b, nil
}

// Decode parses a plan's JSON and validates its structure (not its
// weights: see CheckWeights).
func Decode(b []byte) (*Plan, error) {
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("plan: decoding: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}
