package graph

import (
	"fmt"
	"sort"

	"github.com/aotlm/aotlm/internal/op"
)

// OutlierSuffix names the float weight of a linear's outlier channels:
// for weight W, W + OutlierSuffix holds W's columns at those channels
// ([N, len(channels)]).
const OutlierSuffix = ".outliers"

// SplitOutliers returns a copy of g in which every linear whose weight is
// a key of outliers reads its input with those channels set to zero
// (op.ZeroCols), and a float linear over just those channels
// (op.GatherCols, weight W+OutlierSuffix) is added to its output:
//
//	y = W·x  becomes  y = W·zero(x, idx) + W_idx·x[idx]
//
// With W's columns at idx moved into W_idx (and zero in W) this is the
// same function; what changes is that a quantized W's int8 activations
// no longer carry the outliers (mllm's shadow outlier execution). Linears
// reading one value with the same channels share the two column steps.
func SplitOutliers(g *Graph, outliers map[string][]int) (*Graph, error) {
	for name, idx := range outliers {
		shape, ok := g.Weights[name]
		if !ok || len(shape) != 2 {
			return nil, fmt.Errorf("graph: outlier channels for %q, which is not a linear weight of the graph", name)
		}
		if err := CheckIndex(idx, shape[1]); err != nil {
			return nil, fmt.Errorf("graph: outlier channels of %s: %w", name, err)
		}
	}
	used := map[string]bool{}
	for _, n := range g.Nodes {
		if n.Op == op.Embed {
			if _, ok := outliers[n.Weight]; ok {
				return nil, fmt.Errorf("graph: outlier channels for %s, which is also an embedding table", n.Weight)
			}
		}
	}
	out := &Graph{Weights: make(map[string][]int, len(g.Weights)+len(outliers)), Output: -1,
		Layers: g.Layers, KVCols: g.KVCols, States: append([]int(nil), g.States...)}
	for k, v := range g.Weights {
		out.Weights[k] = v
	}
	remap := make([]int, len(g.Nodes))
	type split struct{ zero, gather int }
	shared := map[string]split{}
	for i, n := range g.Nodes {
		n.In = append([]int(nil), n.In...)
		for j, x := range n.In {
			n.In[j] = remap[x]
		}
		idx, ok := outliers[n.Weight]
		if n.Op != op.Linear || !ok {
			remap[i] = out.add(n)
			continue
		}
		used[n.Weight] = true
		x := n.In[0]
		key := fmt.Sprint(x, idx)
		s, ok := shared[key]
		if !ok {
			s = split{zero: out.ZeroCols(x, idx), gather: out.GatherCols(x, idx)}
			shared[key] = s
		}
		n.In = []int{s.zero}
		y := out.add(n)
		name := n.Weight + OutlierSuffix
		if _, clash := g.Weights[name]; clash {
			return nil, fmt.Errorf("graph: the model already has a weight named %s", name)
		}
		yo := out.Linear(s.gather, name, n.Cols, "")
		remap[i] = out.Add(y, yo)
	}
	if len(used) != len(outliers) {
		var missing []string
		for name := range outliers {
			if !used[name] {
				missing = append(missing, name)
			}
		}
		sort.Strings(missing)
		return nil, fmt.Errorf("graph: outlier channels for %v, which no linear reads", missing)
	}
	if g.Output >= 0 {
		out.Output = remap[g.Output]
	}
	return out, nil
}

// TakeOutliers splits w [rows, cols] for SplitOutliers: main is w with the
// columns idx set to zero, out holds those columns [rows, len(idx)].
func TakeOutliers(w []float32, rows, cols int, idx []int) (main, out []float32) {
	main = append([]float32(nil), w[:rows*cols]...)
	out = make([]float32, rows*len(idx))
	for r := range rows {
		for i, c := range idx {
			out[r*len(idx)+i] = main[r*cols+c]
			main[r*cols+c] = 0
		}
	}
	return main, out
}

// PutOutliers is TakeOutliers' inverse: it writes the columns out [rows,
// len(idx)] back into main [rows, cols] at idx, in place.
func PutOutliers(main []float32, rows, cols int, idx []int, out []float32) {
	for r := range rows {
		for i, c := range idx {
			main[r*cols+c] = out[r*len(idx)+i]
		}
	}
}
