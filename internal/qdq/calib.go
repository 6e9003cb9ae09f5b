package qdq

import (
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
)

// DefaultCalibTokens is the length of the greedy sequence calibration runs
// over when it is given no ids, as the compiler's KV calibration does.
const DefaultCalibTokens = 128

// Observer is called with each linear and attention input of a calibration
// pass (see graph.InputHook); it must not keep or modify x.
type Observer func(n *graph.Node, slot int, x []float32, rows, cols int)

// Observe runs m's float graph over ids in passes of 32 tokens (at most ctx
// of them), or, when ids is empty, over DefaultCalibTokens tokens it
// generates greedily from BOS (token 1 when there is none), exactly as the
// compiler's KV calibration does, calling obs with every input.
func Observe(m *arch.Model, ids []int, ctx int, obs Observer) error {
	g, err := arch.Build(&m.Config, arch.BuildOptions{})
	if err != nil {
		return err
	}
	in, err := graph.NewInterpreter(g, m.Weights, 1)
	if err != nil {
		return err
	}
	in.SetInputHook(func(n *graph.Node, slot int, x []float32, rows, cols int) []float32 {
		obs(n, slot, x, rows, cols)
		return nil
	})
	n := len(ids)
	if n == 0 {
		n = DefaultCalibTokens
	}
	n = min(n, ctx, m.Config.Context)
	st := in.NewState(n)
	if len(ids) > 0 {
		for lo := 0; lo < n; lo += 32 {
			if _, _, err := in.Run(st, ids[lo:min(lo+32, n)]); err != nil {
				return fmt.Errorf("qdq: calibration: %w", err)
			}
		}
		return nil
	}
	next := max(m.Config.BOS, 1)
	for range n {
		out, rows, err := in.Run(st, []int{next})
		if err != nil {
			return fmt.Errorf("qdq: calibration: %w", err)
		}
		last := out[(rows-1)*len(out)/rows:]
		next = 0
		for i, x := range last {
			if x > last[next] {
				next = i
			}
		}
	}
	return nil
}

// CalibrateKV returns the uint8 KV cache scales the compiler derives for m
// from the same sequence (see Observe): per layer and head, clip = the
// largest |x| seen, scale = clip/127.
func CalibrateKV(m *arch.Model, ids []int, ctx int) (*KV, error) {
	kv := &KV{}
	err := Observe(m, ids, ctx, func(n *graph.Node, slot int, x []float32, rows, cols int) {
		a := n.Attn
		if n.Op != op.Attention || slot == 0 {
			return
		}
		for len(kv.K) <= a.Layer {
			kv.K, kv.V = append(kv.K, nil), append(kv.V, nil)
		}
		dst := &kv.K[a.Layer]
		if slot == 2 {
			dst = &kv.V[a.Layer]
		}
		if *dst == nil {
			*dst = make([]float32, a.KVHeads)
		}
		for r := range rows {
			for h := range a.KVHeads {
				for _, v := range x[r*cols+h*a.HeadDim : r*cols+(h+1)*a.HeadDim] {
					(*dst)[h] = max((*dst)[h], float32(math.Abs(float64(v))))
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	for l := range kv.K {
		if kv.K[l] == nil || kv.V[l] == nil {
			return nil, fmt.Errorf("qdq: kv calibration: cache layer %d has no attention", l)
		}
		for h := range kv.K[l] {
			kv.K[l][h] = float32(float64(kv.K[l][h]) / 127)
			kv.V[l][h] = float32(float64(kv.V[l][h]) / 127)
		}
	}
	return kv, nil
}

// CalibrateRanges returns the [min, max] of every linear's input over the
// sequence (see Observe), by weight name: the static ranges of Sim.Static16.
func CalibrateRanges(m *arch.Model, ids []int, ctx int) (map[string]Range, error) {
	out := map[string]Range{}
	err := Observe(m, ids, ctx, func(n *graph.Node, slot int, x []float32, rows, cols int) {
		if n.Op != op.Linear {
			return
		}
		r, ok := out[n.Weight]
		if !ok {
			r = Range{Min: float32(math.Inf(1)), Max: float32(math.Inf(-1))}
		}
		for _, v := range x {
			r.Min, r.Max = min(r.Min, v), max(r.Max, v)
		}
		out[n.Weight] = r
	})
	return out, err
}
