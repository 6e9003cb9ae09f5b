package arch

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
)

// Qwen3.5's multi-token-prediction (MTP) draft head: for a row j it reads
// the next token t_{j+1} and h_j, the target's hidden state after its
// final norm at row j (BuildOptions.Hidden), and gives draft logits for
// t_{j+2}:
//
//	x = fc([pre_fc_norm_embedding(embed(t_{j+1})) ; pre_fc_norm_hidden(h_j)])
//	x = one gated full-attention block (its own cache) of x
//	logits = lm_head(norm(x))
//
// with the target's embedding table and classifier, rows at positions
// j+1. HF names its tensors mtp.*; llama.cpp's converter keeps them as
// block L (L = the text layers) with nextn.eh_proj (fc), nextn.enorm,
// nextn.hnorm and nextn.shared_head_norm (norm). fc's input columns are
// [embedding | hidden]; the graph reads its two halves as two weights
// (mtp.fc.embed.weight, mtp.fc.hidden.weight). Gains are (1 + w) as in
// the target.

// MTPGraph is the draft head's graph and its weights. The graph reads the
// token ids (t_{j+1}) and the hidden rows (h_j) as graph.Input.IDs and
// graph.Input.Rows.
type MTPGraph struct {
	Graph   *graph.Graph
	Weights graph.Weights
}

// LoadMTP reads the first MTP block of a Qwen3.5 checkpoint whose config
// is c (ConfigOf).
func LoadMTP(ck format.Checkpoint, c *Config) (*MTPGraph, error) {
	if c.Family != "qwen35" || c.DeltaNet == nil {
		return nil, fmt.Errorf("%s: no multi-token-prediction head (only qwen35 has one)", c.Family)
	}
	if c.DeltaNet.MTPLayers < 1 {
		return nil, errors.New("qwen35: the checkpoint declares no multi-token-prediction block")
	}
	if err := validateQwen35(c); err != nil {
		return nil, err
	}
	g, err := buildQwen35MTP(c, true)
	if err != nil {
		return nil, err
	}
	w := graph.Weights{}
	for name, shape := range g.Weights {
		src, stored, half := qwen35MTPName(c, name, shape)
		info, ok := format.Find(ck, src)
		if !ok {
			return nil, fmt.Errorf("qwen35: the checkpoint has no tensor %q (the multi-token-prediction head)", src)
		}
		if !shapeIs(info.Shape, stored) {
			return nil, fmt.Errorf("qwen35: tensor %q has shape %v, the config implies %v", src, info.Shape, stored)
		}
		v, err := ck.ReadFloat32(src)
		if err != nil {
			return nil, fmt.Errorf("qwen35: reading %q: %w", src, err)
		}
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("qwen35: tensor %q holds %v at index %d", src, x, i)
			}
		}
		if half >= 0 {
			v = columnsOf(v, stored[0], stored[1], half*shape[1], (half+1)*shape[1])
		}
		if c.Source == "hf" && strings.Contains(name, "norm") { // every gain here is (1 + w)
			for i := range v {
				v[i]++
			}
		}
		w[name] = v
	}
	return &MTPGraph{Graph: g, Weights: w}, nil
}

// MTPGenerationGraph returns the draft head's graph for generation, as
// Build returns the model's without AllLogits: the rows its classifier
// reads (after mtp.norm) are selected (op.SelectRows, the last row in the
// interpreter, the rows a pass asks for in a compiled plan) before the
// classifier. Its weights are LoadMTP's.
func MTPGenerationGraph(c *Config) (*graph.Graph, error) {
	if c.Family != "qwen35" || c.DeltaNet == nil || c.DeltaNet.MTPLayers < 1 {
		return nil, fmt.Errorf("%s: no multi-token-prediction head", c.Family)
	}
	return buildQwen35MTP(c, false)
}

// HasMTP reports whether c declares a multi-token-prediction head that
// LoadMTP reads.
func HasMTP(c *Config) bool {
	return c.Family == "qwen35" && c.DeltaNet != nil && c.DeltaNet.MTPLayers > 0
}

func buildQwen35MTP(c *Config, allLogits bool) (*graph.Graph, error) {
	rope, err := ropeOf(c)
	if err != nil {
		return nil, err
	}
	g := graph.New()
	eps := float32(c.NormEps)
	e := g.RMSNorm(g.Embed(g.Tokens(), "model.embed_tokens.weight", c.Vocab, c.Hidden),
		"mtp.pre_fc_norm_embedding.weight", eps, 0)
	h := g.RMSNorm(g.Rows(c.Hidden), "mtp.pre_fc_norm_hidden.weight", eps, 0)
	x := g.Add(g.Linear(e, "mtp.fc.embed.weight", c.Hidden, ""), g.Linear(h, "mtp.fc.hidden.weight", c.Hidden, ""))
	p := "mtp.layers.0."
	o := qwen35Attention(g, c, g.RMSNorm(x, p+"input_layernorm.weight", eps, 0), p+"self_attn.", 0, rope)
	x = qwen35MLP(g, c, g.Add(x, o), p)
	x = g.RMSNorm(x, "mtp.norm.weight", eps, 0)
	if !allLogits {
		x = g.LastRow(x)
	}
	g.SetOutput(qwen35Head(g, c, x))
	return g, nil
}

// qwen35MTPName returns the checkpoint name and stored shape of a draft
// head weight, and which half of fc's columns it is (-1: the whole).
func qwen35MTPName(c *Config, name string, shape []int) (string, []int, int) {
	half := -1
	switch name {
	case "mtp.fc.embed.weight":
		half = 0
	case "mtp.fc.hidden.weight":
		half = 1
	}
	stored := shape
	if half >= 0 {
		stored = []int{shape[0], 2 * shape[1]}
		name = "mtp.fc.weight"
	}
	if c.Source == "hf" {
		return name, stored, half
	}
	blk := fmt.Sprintf("blk.%d.", c.Layers)
	switch name {
	case "mtp.fc.weight":
		return blk + "nextn.eh_proj.weight", stored, half
	case "mtp.pre_fc_norm_embedding.weight":
		return blk + "nextn.enorm.weight", stored, half
	case "mtp.pre_fc_norm_hidden.weight":
		return blk + "nextn.hnorm.weight", stored, half
	case "mtp.norm.weight":
		return blk + "nextn.shared_head_norm.weight", stored, half
	}
	if rest, ok := strings.CutPrefix(name, "mtp.layers.0."); ok {
		if v, ok := ggufQwen35Names[rest]; ok {
			return blk + v, stored, half
		}
	}
	src, _ := mapLayerName(name, ggufQwen35Names)
	return src, stored, half
}

// columnsOf returns columns [lo, hi) of v [rows, cols].
func columnsOf(v []float32, rows, cols, lo, hi int) []float32 {
	out := make([]float32, 0, rows*(hi-lo))
	for r := 0; r < rows; r++ {
		out = append(out, v[r*cols+lo:r*cols+hi]...)
	}
	return out
}
