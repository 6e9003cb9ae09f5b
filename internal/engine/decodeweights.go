package engine

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/op"
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
