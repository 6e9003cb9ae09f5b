package engine_test

import (
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/op"
)

// TestSlotPrefetchSteps: in the one-row plan of a 4-bit stories260K (q,
// k and v one dispatch) and of a tiny float32 Llama (each linear alone),
// each attention layer's slot is asked for exactly once, by the lead of
// the last linear dispatch before that attention step, with no other
// linear between that dispatch and the attention.
func TestSlotPrefetchSteps(t *testing.T) {
	for _, fused := range []bool{true, false} {
		var e *engine.Engine
		if fused {
			e, _ = compilePath(t, quantizeStories(t, "w4a16-lpbq"), compile.Options{ARLens: []int{1, 4}, Ctx: 64})
		} else {
			e = compileModel(t, tinyModel(t), 64, 1, 4)
		}
		steps := engine.SlotSteps(e)
		asked := map[int]int{} // layer -> step asking for it
		for i, m := range steps {
			if m.SlotLayer > 0 {
				if _, dup := asked[m.SlotLayer-1]; dup {
					t.Errorf("fused %v: layer %d asked for twice", fused, m.SlotLayer-1)
				}
				asked[m.SlotLayer-1] = i
			}
		}
		layers := 0
		for j, m := range steps {
			if m.Op != op.Attention {
				continue
			}
			layers++
			i, ok := asked[m.Layer]
			if !ok || steps[i].Op != op.Linear || i > j {
				t.Errorf("fused %v: attention step %d (layer %d) asked for by step %d (%v)", fused, j, m.Layer, i, ok)
				continue
			}
			for k := i + steps[i].Fuse + 1; k < j; k++ {
				if steps[k].Op == op.Linear {
					t.Errorf("fused %v: linear step %d runs after the asking dispatch %d-%d, before attention %d", fused, k, i, i+steps[i].Fuse, j)
				}
			}
			if fused && steps[i].Fuse == 0 {
				t.Errorf("fused %v: the asking step %d is not the lead of q, k and v", fused, i)
			}
		}
		if layers == 0 || len(asked) != layers {
			t.Errorf("fused %v: %d layers asked for, %d attention steps", fused, len(asked), layers)
		}
	}
}
