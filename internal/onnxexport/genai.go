package onnxexport

import (
	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/graph"
)

// genaiConfig describes the export in the shape of onnxruntime-genai's
// genai_config.json: the decoder's sizes, the names of its inputs and
// outputs (the cache names with %d for the layer), and the two graphs of
// the pipeline with their AR lengths.
func genaiConfig(c *arch.Config, g *graph.Graph, opts Options) map[string]any {
	heads, kvHeads, headDim := c.Heads, c.KVHeads, c.HeadDim
	for i := range g.Nodes {
		if a := g.Nodes[i].Attn; a != nil {
			heads, kvHeads, headDim = a.Heads, a.KVHeads, a.HeadDim
			break
		}
	}
	activations, cacheType := "float", "float32"
	if q := opts.Quant; q != nil {
		if q.Activations != nil {
			activations = "qdq-uint16"
		}
		if q.KV != nil {
			cacheType = "uint8"
		}
	}
	stage := func(file string, rows int) map[string]any {
		return map[string]any{
			"filename":         file,
			"ar_length":        rows,
			"run_on_prompt":    rows > 1,
			"run_on_token_gen": rows == 1,
		}
	}
	model := map[string]any{}
	if c.BOS >= 0 {
		model["bos_token_id"] = c.BOS
	}
	if len(c.EOS) > 0 {
		model["eos_token_id"] = c.EOS
	}
	return map[string]any{
		"model": withKeys(model, map[string]any{
			"type":           c.Family,
			"context_length": opts.Context,
			"vocab_size":     c.Vocab,
			"decoder": map[string]any{
				"head_size":           headDim,
				"hidden_size":         c.Hidden,
				"num_attention_heads": heads,
				"num_key_value_heads": kvHeads,
				"num_hidden_layers":   g.Layers,
				"inputs": map[string]any{
					"input_ids":        InputIDs,
					"position_ids":     PositionIDs,
					"attention_mask":   AttentionMask,
					"past_key_names":   "past_key_values.%d.key",
					"past_value_names": "past_key_values.%d.value",
				},
				"outputs": map[string]any{
					"logits":              Logits,
					"present_key_names":   "present.%d.key",
					"present_value_names": "present.%d.value",
				},
				"pipeline": []any{
					map[string]any{"prefill": stage(PrefillFile, opts.ARLen)},
					map[string]any{"decode": stage(DecodeFile, 1)},
				},
				"weights_file":  WeightsFile,
				"kv_cache_type": cacheType,
				"activations":   activations,
			},
		}),
		"search": map[string]any{"max_length": opts.Context},
	}
}

// withKeys returns m with the entries of more added.
func withKeys(m, more map[string]any) map[string]any {
	for k, v := range more {
		m[k] = v
	}
	return m
}
