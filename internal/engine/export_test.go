package engine

import (
	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
)

// LoadParts opens an engine over a manifest, blobs and tensors held in
// memory (an artifact taken apart), as OpenWith does over a file.
func LoadParts(m plan.Manifest, blob func(name string) ([]byte, error),
	tensor func(name string) (artifact.TensorInfo, []byte, error), opts Options) (*Engine, error) {
	return load(m, blob, tensor, opts)
}

// SplitEverything makes every step that can be split across workers be
// split, however small, until the returned function restores the limits.
func SplitEverything() (restore func()) {
	cost, elems, lora := minParallelCost, minParallelElems, minAdapterSplit
	minParallelCost, minParallelElems, minAdapterSplit = 1, 1, 1
	return func() { minParallelCost, minParallelElems, minAdapterSplit = cost, elems, lora }
}

// NoFusion makes engines opened until the returned function runs dispatch
// every linear alone (fuseLinears groups none).
func NoFusion() (restore func()) {
	limit := fuseLimit
	fuseLimit = 1
	return func() { fuseLimit = limit }
}

// FusedLinears counts the linears that run inside a group with others in
// e's plans (the leaders' members).
func FusedLinears(e *Engine) int {
	n := 0
	for _, p := range e.plans {
		for _, st := range p.steps {
			n += st.fuse
		}
	}
	return n
}

// StepMark is what SlotSteps reports of one step of a plan.
type StepMark struct {
	Op        op.Op
	Layer     int // an attention step's cache layer, else -1
	Fuse      int // linears joining this one's dispatch
	SlotLayer int // 1 + the layer whose slot this step asks for, or 0
}

// SlotSteps reports every step of e's one-row plan (plans[0]).
func SlotSteps(e *Engine) []StepMark {
	var out []StepMark
	for _, st := range e.plans[0].steps {
		m := StepMark{Op: st.Op, Layer: -1, Fuse: st.fuse, SlotLayer: st.slotLayer}
		if st.Op == op.Attention {
			m.Layer = st.Attn.Layer
		}
		out = append(out, m)
	}
	return out
}

// FlashMinSlots is flashMinSlots, for tests that need passes long enough
// for the tiled attention.
const FlashMinSlots = flashMinSlots

// SetSplitMinSlots sets the fewest slots of a decode row's split
// attention and returns the function that restores it.
func SetSplitMinSlots(n int) func() {
	old := splitMinSlots
	splitMinSlots = n
	return func() { splitMinSlots = old }
}
