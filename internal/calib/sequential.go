package calib

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
)

// QuantizeFunc quantizes one weight given its input's statistics and
// returns the dequantized values the model computes with afterwards.
type QuantizeFunc func(name string, w []float32, in *Input) ([]float32, error)

// Sequential recollects the statistics of each input in graph order on a
// model whose earlier linears are already quantized, so each layer's
// inputs carry its predecessors' quantization error (as GPTQ's reference
// implementation proceeds layer by layer). st gives the inputs (from
// Collect, with or without Hessians); they are replaced by the new
// statistics. q quantizes the weights of one input once its statistics are
// known. m's own weights are not changed. It costs one pass over the
// samples per input.
func Sequential(m *arch.Model, st *Stats, samples [][]int, opts Options, q QuantizeFunc) error {
	work := make(graph.Weights, len(m.Weights))
	for k, v := range m.Weights {
		work[k] = v
	}
	g := st.Graph
	in, err := graph.NewInterpreter(g, work, opts.Threads)
	if err != nil {
		return err
	}
	ctx := 0
	for _, s := range samples {
		ctx = max(ctx, len(s))
	}
	state := in.NewState(ctx)
	keep := opts.SampleRows
	if keep <= 0 {
		keep = 256
	}
	total := 0
	for _, s := range samples {
		total += len(s)
	}
	stride := max(1, (total+keep-1)/keep)
	for i, old := range st.Inputs {
		x := &Input{Node: old.Node, Cols: old.Cols, Weights: old.Weights,
			SumAbs: make([]float64, old.Cols), SumSq: make([]float64, old.Cols), MaxAbs: make([]float64, old.Cols),
			Min: old.Min, Max: old.Max}
		x.Min, x.Max = float32(1e38), float32(-1e38)
		if old.H != nil {
			x.H = make([]float64, old.Cols*old.Cols)
			x.threads = opts.Threads
		}
		row0, seen := 0, false
		in.SetInputHook(func(n *graph.Node, slot int, v []float32, rows, cols int) []float32 {
			if n.Op == op.Linear && slot == 0 && n.In[0] == x.Node && !seen {
				seen = true
				x.observe(v, rows, row0, stride, keep)
			}
			return nil
		})
		for _, s := range samples {
			state.Reset()
			seen = false
			if _, _, err := in.Run(state, s); err != nil {
				return fmt.Errorf("calib: sequential pass %d: %w", i+1, err)
			}
			row0 += len(s)
		}
		st.Inputs[i] = x
		for _, name := range x.Weights {
			st.ByWeight[name] = x
			deq, err := q(name, m.Weights[name], x)
			if err != nil {
				return err
			}
			if len(deq) != len(work[name]) {
				return fmt.Errorf("calib: %s quantized to %d values, not %d", name, len(deq), len(work[name]))
			}
			work[name] = deq
		}
	}
	return nil
}
