package engine

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
)

// DecodeWeights returns views of the weight bytes one decode step streams
// (the steps of the smallest plan, AR-1), each tensor once and in the
// order the steps first read them: every weight but an embedding table
// that only embed steps read, of which a step reads one row per token (a
// table the classifier shares, as in tied models, is read whole and
// counted). Their total over the machine's read bandwidth is the decode
// floor, the time a token cannot beat. The views are valid until Close.
func (e *Engine) DecodeWeights() ([][]byte, error) {
	if len(e.plans) == 0 {
		return nil, fmt.Errorf("engine: no plan")
	}
	steps := e.plans[0].steps
	streamed := map[string]bool{}
	for _, st := range steps {
		if st.Op != op.Embed {
			for _, name := range st.Weights {
				streamed[name] = true
			}
		}
	}
	var out [][]byte
	seen := map[string]bool{}
	for _, st := range steps {
		for _, name := range st.Weights {
			if !streamed[name] || seen[name] {
				continue
			}
			seen[name] = true
			_, data, err := e.tensor(name)
			if err != nil {
				return nil, fmt.Errorf("engine: decode weights: %w", err)
			}
			if len(data) > 0 {
				out = append(out, data)
			}
		}
	}
	return out, nil
}

// DecodeKVBytes returns the key and value bytes one decode step reads
// from the cache when depth positions precede it: each causal attention
// step of the smallest plan reads its key/value heads' keys and values
// at the positions its row sees (depth+1, or its window when that is
// shorter), at the cache's element size (a uint8 cache's scales not
// counted; a 4-bit cache's rows with their steps and offsets). With the
// weight bytes (DecodeWeights) it is what a token at that depth streams.
func (e *Engine) DecodeKVBytes(depth int) int64 {
	if len(e.plans) == 0 || depth < 0 {
		return 0
	}
	elem := int64(4)
	if kc := e.manifest.KVCache; kc != nil {
		elem = map[string]int64{plan.KVCacheF16: 2, plan.KVCacheU8: 1}[kc.DType]
	}
	var total int64
	for _, st := range e.plans[0].steps {
		a := st.Attn
		if a == nil || (st.Op != op.Attention && st.Op != op.SharedAttention) || a.Bidirectional {
			continue
		}
		seen := depth + 1
		if a.Window > 0 {
			seen = min(seen, a.Window)
		}
		if kc := e.manifest.KVCache; kc != nil && plan.IsKVQ4(kc.DType) {
			total += int64(seen) * int64(a.KVHeads*kernel.KVQ4RowBytes(a.HeadDim)) * 2
			continue
		}
		total += int64(seen) * int64(a.KVHeads*a.HeadDim) * 2 * elem
	}
	return total
}
