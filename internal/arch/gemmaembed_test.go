package arch

import (
	"encoding/json"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestGemmaEmbedConfigHF: a Gemma3TextModel is an encoder only with
// use_bidirectional_attention; its sentence-transformers pooling and
// dense modules are read, and dense modules that do not chain, carry a
// bias or another activation, or lack their weights are refused.
func TestGemmaEmbedConfigHF(t *testing.T) {
	base := func() map[string]any {
		var m map[string]any
		if err := json.Unmarshal(testutil.ReadFile(t, "arch/gemma3/config.json"), &m); err != nil {
			t.Fatal(err)
		}
		m["architectures"] = []any{"Gemma3TextModel"}
		return m
	}
	dense := func(in, out int) map[string]any {
		return map[string]any{"in_features": float64(in), "out_features": float64(out), "bias": false,
			"activation_function": "torch.nn.modules.linear.Identity"}
	}
	m := base()
	c, err := gemmaEmbedConfigHF(m)
	if err != nil || c.Bidirectional || len(c.DenseOut) != 0 {
		t.Fatalf("without the flag: %+v, %v; want a causal decoder", c, err)
	}
	m["use_bidirectional_attention"] = true
	m[format.MetaSentencePooling] = "mean"
	m[format.MetaSentenceDense] = []any{dense(64, 256), dense(256, 64)}
	c, err = gemmaEmbedConfigHF(m)
	if err != nil || !c.Bidirectional || c.Pooling != "mean" || len(c.DenseOut) != 2 || c.DenseOut[0] != 256 || c.DenseOut[1] != 64 {
		t.Fatalf("EmbeddingGemma: %+v, %v", c, err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string][]any{
		"not chained": {dense(64, 256), dense(128, 64)},
		"bias":        {map[string]any{"in_features": 64.0, "out_features": 64.0, "bias": true}},
		"activation":  {map[string]any{"in_features": 64.0, "out_features": 64.0, "activation_function": "torch.nn.modules.activation.Tanh"}},
		"no weights":  {map[string]any{"in_features": 64.0, "out_features": 64.0, "weights_missing": true, "path": "2_Dense"}},
	} {
		m[format.MetaSentenceDense] = d
		if _, err := gemmaEmbedConfigHF(m); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	m[format.MetaSentenceDense] = []any{dense(64, 32)}
	if c, err := gemmaEmbedConfigHF(m); err == nil && c.Validate() == nil {
		t.Error("dense projections ending in 32 values of a hidden size of 64: accepted")
	}
}
