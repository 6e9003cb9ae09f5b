package compile

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/quant"
)

// DefaultCalibTokens is the length of the calibration sequence the KV
// cache scales come from when no calibration ids are given.
const DefaultCalibTokens = 128

// calibrateKV returns the scales of a uint8 cache: the float32 graph
// interpreter runs over ids, or, when ids is empty, over a sequence it
// generates itself (calibRun), and each layer's key and value heads get
// clip = the largest |x| seen in that head, scale = clip/127
// (quant.KVQuant). Values beyond a clip saturate at run time.
func calibrateKV(g *graph.Graph, w graph.Weights, ids []int, bos, ctx int) (*plan.KVCache, error) {
	st, err := calibRun(g, w, ids, bos, ctx, DefaultCalibTokens)
	if err != nil {
		return nil, err
	}
	kc := &plan.KVCache{DType: plan.KVCacheU8, K: make([][]float32, g.Layers), V: make([][]float32, g.Layers)}
	for _, nd := range g.Nodes {
		a := nd.Attn
		if nd.Op != op.Attention || a == nil || kc.K[a.Layer] != nil {
			continue
		}
		for i, cache := range [][]float32{st.K[a.Layer], st.V[a.Layer]} {
			s, err := headScales(cache[:st.Pos*g.KVCols], g.KVCols, a.KVHeads, a.HeadDim)
			if err != nil {
				return nil, fmt.Errorf("compile: kv calibration: layer %d: %w", a.Layer, err)
			}
			if i == 0 {
				kc.K[a.Layer] = s
			} else {
				kc.V[a.Layer] = s
			}
		}
	}
	for l := range kc.K {
		if kc.K[l] == nil {
			return nil, fmt.Errorf("compile: kv calibration: cache layer %d has no attention", l)
		}
	}
	return kc, nil
}

// CenterCalibTokens is the length of the calibration sequence a 4-bit
// cache's centers come from when no calibration ids are given.
const CenterCalibTokens = 512

// calibRun runs the float32 graph interpreter over ids, or, when ids is
// empty, over a sequence it generates itself (greedy, from bos, or token 1
// when there is none, for DefaultCalibTokens tokens), at most ctx
// positions, and returns its state: the keys and values of every layer.
func calibRun(g *graph.Graph, w graph.Weights, ids []int, bos, ctx, gen int) (*graph.State, error) {
	in, err := graph.NewInterpreter(g, w, 1)
	if err != nil {
		return nil, fmt.Errorf("compile: kv calibration: %w", err)
	}
	n := len(ids)
	if n == 0 {
		n = gen
	}
	n = min(n, ctx)
	st := in.NewState(n)
	if len(ids) > 0 {
		for lo := 0; lo < n; lo += 32 {
			if _, _, err := in.Run(st, ids[lo:min(lo+32, n)]); err != nil {
				return nil, fmt.Errorf("compile: kv calibration: %w", err)
			}
		}
	} else {
		next := max(bos, 1)
		for range n {
			out, rows, err := in.Run(st, []int{next})
			if err != nil {
				return nil, fmt.Errorf("compile: kv calibration: %w", err)
			}
			last := out[(rows-1)*len(out)/rows:]
			next = 0
			for i, x := range last {
				if x > last[next] {
					next = i
				}
			}
		}
	}
	return st, nil
}

// centerKV returns the centers of a 4-bit cache of dtype kv: the
// interpreter runs as for calibrateKV (calibRun), and each layer's key
// and value heads get the mean of each of their channels over the
// positions seen (the keys as cached, after the rotary embedding).
func centerKV(g *graph.Graph, w graph.Weights, kv string, ids []int, bos, ctx int) (*plan.KVCache, error) {
	st, err := calibRun(g, w, ids, bos, ctx, CenterCalibTokens)
	if err != nil {
		return nil, err
	}
	kc := &plan.KVCache{DType: kv, KMean: make([][]float32, g.Layers), VMean: make([][]float32, g.Layers)}
	for _, nd := range g.Nodes {
		a := nd.Attn
		if nd.Op != op.Attention || a == nil || kc.KMean[a.Layer] != nil {
			continue
		}
		kc.KMean[a.Layer] = channelMeans(st.K[a.Layer][:st.Pos*g.KVCols], g.KVCols, a.KVHeads*a.HeadDim)
		kc.VMean[a.Layer] = channelMeans(st.V[a.Layer][:st.Pos*g.KVCols], g.KVCols, a.KVHeads*a.HeadDim)
	}
	for l := range kc.KMean {
		if kc.KMean[l] == nil {
			return nil, fmt.Errorf("compile: kv calibration: cache layer %d has no attention", l)
		}
	}
	return kc, nil
}

// channelMeans returns the mean of each of the first n columns of rows of
// cols columns (float64 sums; 0 for a column with no rows).
func channelMeans(rows []float32, cols, n int) []float32 {
	sum := make([]float64, n)
	r := 0
	for ; (r+1)*cols <= len(rows); r++ {
		for j, x := range rows[r*cols : r*cols+n] {
			sum[j] += float64(x)
		}
	}
	out := make([]float32, n)
	if r == 0 {
		return out
	}
	for j, x := range sum {
		out[j] = float32(x / float64(r))
	}
	return out
}

// headScales returns the per-head scales of cache rows of cols columns
// whose first heads*headDim columns are used.
func headScales(rows []float32, cols, heads, headDim int) ([]float32, error) {
	c, err := quant.NewKVCalibrator(heads, headDim)
	if err != nil {
		return nil, err
	}
	for r := 0; r*cols < len(rows); r++ {
		if err := c.Observe(rows[r*cols : r*cols+heads*headDim]); err != nil {
			return nil, err
		}
	}
	p, err := c.Params(true)
	if err != nil {
		return nil, err
	}
	return p.Scales, nil
}
