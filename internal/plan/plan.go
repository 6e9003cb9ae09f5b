package plan

import (
	"encoding/json"
	"fmt"

	"github.com/aotlm/aotlm/internal/op"
)

// Version is the plan encoding this package reads and writes.
const Version = 1

// Plan is a static program for passes of Rows tokens.
type Plan struct {
	Version int      `json:"version"`
	Rows    int      `json:"rows"`  // N, the AR length: tokens per pass
	Arena   int      `json:"arena"` // floats in the activation arena
	Buffers []Buffer `json:"buffers"`
	Steps   []Step   `json:"steps"`
	Output  int      `json:"output"` // buffer id of the logits
	// Hidden, when set, is the buffer id of the rows the classifier reads
	// (the final norm's output, one row per row of the pass), which the
	// plan keeps to its end so that a pass can hand them to a draft head
	// (Manifest.MTP).
	Hidden *int `json:"hidden,omitempty"`
	KV     KV   `json:"kv"`
	// State holds the size in floats of each recurrent state slot, which
	// a session keeps across passes (zero at position 0): token_shift,
	// wkv7 and causal_conv steps each own one.
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
	Op      op.Op    `json:"op"`
	In      []int    `json:"in,omitempty"`
	Out     int      `json:"out"`
	Weights []string `json:"weights,omitempty"`
	Name    string   `json:"name,omitempty"` // a label for errors and dumps

	Eps     float32 `json:"eps,omitempty"`      // rms_norm, head_rms_norm
	Offset  float32 `json:"offset,omitempty"`   // rms_norm, head_rms_norm gain offset
	Scale   float32 `json:"scale,omitempty"`    // scale
	Lo      int     `json:"lo,omitempty"`       // columns; group_rows: leading rows dropped
	Hi      int     `json:"hi,omitempty"`       // columns
	Index   []int   `json:"index,omitempty"`    // gather_cols, zero_cols: ascending columns
	HeadDim int     `json:"head_dim,omitempty"` // head_rms_norm, wkv7: E; hadamard: its block P; causal_conv: its kernel K; ssm_scan: head size P
	Slot    int     `json:"slot,omitempty"`     // token_shift, wkv7, causal_conv, ssm_scan, gated_delta: state slot
	Group   int     `json:"group,omitempty"`    // group_rows: rows joined into one; columns: the block width
	Rope    *Rope   `json:"rope,omitempty"`
	Attn    *Attn   `json:"attn,omitempty"`
	// Delta holds the head sizes of a gated_delta step.
	Delta *op.DeltaDims `json:"delta,omitempty"`
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
	// Sections, when present, splits the RotDim/2 pairs into consecutive
	// runs: the pairs of run j turn by component j of the row's position
	// (multi-axis RoPE, Qwen2-VL's M-RoPE), which a pass gives apart from
	// the row's cache position (engine.Pass.Positions).
	Sections []int `json:"sections,omitempty"`
}

// Components is the number of position components a row carries for r.
func (r *Rope) Components() int { return max(len(r.Sections), 1) }

// Attn configures an attention step (and a shared_attention step, which
// reads cache slot Layer without writing it): Heads query heads and KVHeads
// key/value heads of HeadDim, cache slot Layer, scores scaled by Scale and
// limited to the last Window positions when Window > 0, or, when
// Bidirectional, over the rows of the pass alone (within Window/2
// positions either side when Window > 0).
type Attn struct {
	Layer   int     `json:"layer"`
	Heads   int     `json:"heads"`
	KVHeads int     `json:"kv_heads"`
	HeadDim int     `json:"head_dim"`
	Scale   float32 `json:"scale"`
	Window  int     `json:"window,omitempty"`
	// Bidirectional attention (a vision encoder's, a text encoder's) lets
	// every row see every row of its pass and nothing else: it uses no
	// cache (Layer is not a cache slot). A vision pass must be full; a
	// text encoder's pass holds a whole sequence from position 0.
	Bidirectional bool `json:"bidirectional,omitempty"`
	// Tile, with Bidirectional, limits a row to the rows whose first two
	// rotary position components (a patch's row and column) fall in its
	// Tile x Tile square (window attention); 0: every row of the pass.
	Tile int `json:"tile,omitempty"`
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
